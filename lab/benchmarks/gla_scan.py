"""The chunked causal GLA scan (``mmlvit.ops.gla.gla_chunked``) timed
against its token-by-token recurrence (``gla_recurrent``)."""

from functools import partial

import torch

from .timing import interleaved_times

PASSES = (('forward', 'forward'), ('forward_backward', 'forward + backward'))
TARGET = 20.0  # chunked >= 20x faster than the recurrence


def time_gla_scans(num_heads, head_dims, tokens, repeats, device='cpu'):
    """Seconds of both scans on (1, heads, T, d) inputs, forward only
    (no grad) and forward + backward (median of ``repeats`` calls after
    one first call each, the scans taking turns).

    Returns:
        dict: {'chunked' | 'recurrent': {'forward' | 'forward_backward':
        seconds}}.
    """
    from mmlvit.ops.gla import gla_chunked, gla_recurrent

    torch.manual_seed(0)
    shape = (1, num_heads, tokens, head_dims)
    with torch.device(device):
        q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
        g = torch.nn.functional.logsigmoid(torch.randn(shape)) / 16
        grad = torch.randn(shape)
    g.requires_grad_()
    inputs = (q, k, v, g)
    scans = dict(chunked=gla_chunked, recurrent=gla_recurrent)

    def forward(scan):
        with torch.no_grad():
            scan(*inputs)

    def forward_backward(scan):
        scan(*inputs).backward(grad)
        for t in inputs:
            t.grad = None

    results = {label: {} for label in scans}
    for key, run in (
        ('forward', forward),
        ('forward_backward', forward_backward),
    ):
        fns = {label: partial(run, scan) for label, scan in scans.items()}
        times = interleaved_times(fns, repeats, device)
        for label, figures in times.items():
            results[label][key] = figures['median_s']
    return results


def gla_scan_lines(seconds, num_heads, head_dims, tokens):
    """Markdown lines of :func:`time_gla_scans`' result, and the passes in
    which the chunked scan is less than ``TARGET`` times faster."""
    lines = [
        f'GLA causal scan, T={tokens}, {num_heads} heads of {head_dims}:',
        '',
        '| pass | chunked (ms) | recurrent (ms) | speed-up |',
        '|---|---:|---:|---:|',
    ]
    missed = []
    for key, label in PASSES:
        chunked, recurrent = seconds['chunked'][key], seconds['recurrent'][key]
        speedup = recurrent / chunked
        lines.append(
            f'| {label} | {1e3 * chunked:.1f} | {1e3 * recurrent:.1f} | '
            f'{speedup:.1f} |'
        )
        if speedup < TARGET:
            missed.append(
                f'GLA chunked scan ({label}) only {speedup:.1f}x faster than '
                f'the recurrence (target {TARGET:.0f}x)'
            )
    return lines, missed
