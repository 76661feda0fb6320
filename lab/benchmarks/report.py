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


def ratio_rows(results, fields, reference, figures):
    """Rows of nested results with their ratios to a reference.

    Args:
        results (dict): Nested by ``fields``; the last level holds the
            compared things (e.g. backbones), ``reference`` among them.
        fields (sequence[str]): The row keys of the levels.
        reference (str): The key of the reference at the last level.
        figures (callable): An 'ok' result -> the dict of its row figures.

    Returns:
        list[dict]: One row per result: its fields, ``status`` (see
        :func:`status`) and, when 'ok', ``figures(result)`` and its ratios
        to the reference of the same group (:func:`compare`) when that one
        has a time.
    """
    rows = []

    def walk(tree, path):
        if len(path) < len(fields) - 1:
            for key, subtree in tree.items():
                walk(subtree, (*path, key))
            return
        ref = tree.get(reference, {})
        for key, res in tree.items():
            row = dict(zip(fields, (*path, key)), status=status(res))
            if row['status'] == 'ok':
                row.update(figures(res))
                if 'seconds' in ref:
                    row.update(compare(res, ref))
            rows.append(row)

    walk(results, ())
    return rows


def column_table(columns, rows, keys, missing='-'):
    """Markdown lines of ``rows`` (dicts), one line each.

    Args:
        columns (list[tuple]): ``(header, key, fmt)`` or ``(header, key,
            fmt, align)``: the cell is ``fmt.format(row[key])`` (``fmt``
            may be a callable of the value), ``missing`` where the row has
            no ``key``; ``align`` is ':' (right, the default) or '-'.
        keys (int): The first ``keys`` columns name the case: a row whose
            ``status`` is not 'ok' shows them, the status, then blanks.
        missing (str): The cell of an absent value.
    """
    lines = []
    for row in rows:
        cells = []
        for i, (_, key, fmt, *_) in enumerate(columns):
            if i >= keys and row.get('status', 'ok') != 'ok':
                cells += [row['status']] + [''] * (len(columns) - i - 1)
                break
            if key not in row:
                cells.append(missing)
            else:
                value = row[key]
                cells.append(
                    fmt(value) if callable(fmt) else fmt.format(value)
                )
        lines.append(cells)
    header = [column[0] for column in columns]
    align = ''.join((column[3:] or (':',))[0] for column in columns)
    return markdown_table(header, lines, align)


def growth_lines(memory, names, reference, tolerance=0.1):
    """How a peak memory grows with the token count.

    Args:
        memory (dict): name -> {N: MiB}.
        names (list[str]): The names in the order listed.
        reference (str): Exempt from the target (softmax grows as N^2).
        tolerance (float): A largest deviation from the least-squares line
            (relative to the largest peak, :func:`linear_fit_error`) above
            this, over 3 N or more, misses the target.

    Returns:
        tuple[list[str], list[str]]: Markdown lines (one per name: its
        deviation from a line, the growth of the peak between the two
        largest N against the token ratio) and the missed targets.
    """
    lines = [
        'Peak-memory growth (largest relative deviation from a straight '
        'line a + bN over the measured N; peak at the largest N over the '
        'peak at the next one, against the token ratio):',
        '',
    ]
    missed = []
    for name in names:
        ordered = sorted(memory.get(name, {}))
        if not ordered:
            continue
        mib = [memory[name][n] for n in ordered]
        deviation = linear_fit_error(ordered, mib)
        growth = ''
        if len(ordered) > 1:
            growth = (
                f', x{ratio(mib[-1], mib[-2]):.2f} from N={ordered[-2]} to '
                f'{ordered[-1]} (tokens x{ordered[-1] / ordered[-2]:.2f})'
            )
        lines.append(f'- {name}: {deviation:.1%} off a line{growth}')
        if name != reference and len(ordered) > 2 and deviation > tolerance:
            missed.append(f'{name}: peak memory {deviation:.0%} off linear')
    return lines, missed


def flop_ceiling_verdict(case, row, target):
    """Whether a row's speed-up reaches ``target`` (a fraction) of its FLOP
    ratio (its ``speedup``, ``flop_ratio``, ``fraction_of_flop_ratio``, see
    :func:`compare`); 'n/a' with its status when it has no speed-up."""
    if 'speedup' not in row:
        return f'n/a    {case}: {row["status"]}'
    fraction = row['fraction_of_flop_ratio']
    return verdict(
        fraction >= target,
        case,
        f'speed-up {row["speedup"]:.2f}x, FLOP ratio {row["flop_ratio"]:.2f}, '
        f'{100 * fraction:.0f} % of it (target >= {100 * target:.0f} %)',
    )


def gflop_text(gflop):
    """GFLOP with 3 significant digits, whole numbers from 100 on."""
    return f'{gflop:.0f}' if gflop >= 100 else f'{gflop:.3g}'


def write_table(path, text, verdicts):
    """Write a table and its verdicts to ``path`` and print them."""
    with open(path, 'w') as f:
        f.write(text + '\n\n' + '\n'.join(verdicts) + '\n')
    print(text)
    print('\n'.join(verdicts))
