"""A grid of cases run one after another, results saved as they come."""

import time

from .options import describe_device
from .process import run_case
from .report import nested_set, status, write_json
from .timing import Deadline


def run_grid(cases, measure, args, json_path, describe, summary,
             timeout_s=None, skip=None):  # fmt: skip
    """Run every case and return the nested results.

    Args:
        cases (list[tuple]): Each case is the path of its result in the
            nested results dict (strings), e.g. ``(model, px, mode)``.
        measure (callable): ``measure(case) -> dict`` (run by
            :func:`.process.run_case`: a forked child on the CPU, this
            process on CUDA).
        args (Namespace): The tool's options (``device``, ``dtype``,
            ``max_seconds``; all saved with the results).
        json_path (str): ``{config, device, results}`` is written there
            after every case, so a run stopped from outside keeps what it
            measured.
        describe (callable): case -> its name in the progress lines.
        summary (callable): result -> one line (for results with
            ``status`` 'ok').
        timeout_s (float, optional): CPU only: stop a case after this long.
        skip (callable, optional): case -> a reason not to run it, or None.

    Returns:
        dict: The nested results; a case not run holds
        ``dict(skipped=...)``, a failed one ``dict(error=...)``.
    """
    deadline = Deadline(args.max_seconds)
    threads = getattr(args, 'threads', None)
    device = describe_device(args.device, args.dtype, threads)
    results = {}
    for case in cases:
        start = time.perf_counter()
        reason = skip(case) if skip else None
        if reason is None and deadline.expired():
            reason = f'--max-seconds {args.max_seconds:g} reached'
        if reason is not None:
            res = dict(skipped=reason)
        else:
            res = run_case(
                measure, case, device=args.device, timeout_s=timeout_s
            )
        nested_set(results, case, res)
        state = status(res)
        print(
            f'{describe(case)}: {summary(res) if state == "ok" else state} '
            f'[{time.perf_counter() - start:.0f} s]',
            flush=True,
        )
        write_json(
            json_path, dict(config=vars(args), device=device, results=results)
        )
    return results
