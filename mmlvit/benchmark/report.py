"""Results as rows, ratios, Markdown tables and verdicts."""

import json
import math
import statistics


def status(result):
    """'ok', 'skipped: REASON' or 'failed: LAST LINE OF THE ERROR'."""
    if 'skipped' in result:
        return f'skipped: {result["skipped"]}'
    if 'error' in result:
        return f'failed: {result["error"].strip().splitlines()[-1]}'
    return 'ok'


def ratio(a, b):
    """a / b, NaN when b is 0 (e.g. a peak below the page granularity)."""
    return a / b if b else math.nan


def compare(result, reference):
    """A result's ratios to the reference's: ``speedup`` (reference time
    / time), ``flop_ratio`` (reference FLOPs / FLOPs: the arithmetic
    ceiling of the speed-up), ``fraction_of_flop_ratio`` (speed-up / FLOP
    ratio) and ``memory_ratio`` (peak / reference peak); each where both
    have the figures (``seconds``, ``flops``, ``peak_mib``)."""
    out = {}
    if 'seconds' in result and 'seconds' in reference:
        out['speedup'] = reference['seconds'] / result['seconds']
    if result.get('flops') and reference.get('flops'):
        out['flop_ratio'] = reference['flops'] / result['flops']
        if 'speedup' in out:
            out['fraction_of_flop_ratio'] = out['speedup'] / out['flop_ratio']
    if 'peak_mib' in result and 'peak_mib' in reference:
        out['memory_ratio'] = ratio(result['peak_mib'], reference['peak_mib'])
    return out


def markdown_table(header, rows, align=None):
    """Lines of a Markdown table; ``align`` is one of '-', ':' (right) per
    column or a ready separator row."""
    if align is None or len(align) == len(header):
        align = '|' + ''.join(
            '---:|' if a == ':' else '---|'
            for a in (align or '-' * len(header))
        )
    lines = ['| ' + ' | '.join(header) + ' |', align]
    lines += ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows]
    return lines


def verdict(ok, case, detail):
    """'met    CASE: DETAIL' or 'MISSED CASE: DETAIL'."""
    return f'{"met   " if ok else "MISSED"} {case}: {detail}'


def linear_fit_error(xs, ys):
    """Largest deviation of ``ys`` from the least-squares line a + b x,
    relative to the largest y (how far a growth is from linear). Two points
    or fewer always lie on a line: 0."""
    if len(xs) < 3:
        return 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / var
    residual = max(
        abs(y - (mean_y + slope * (x - mean_x))) for x, y in zip(xs, ys)
    )
    return residual / (max(ys) or 1.0)


def nested_set(tree, path, value):
    """``tree[path[0]][path[1]]... = value``, creating the dicts between."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f, indent=1)
