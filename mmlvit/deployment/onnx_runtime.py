"""Run an exported graph in onnxruntime: agreement with PyTorch and
latency."""

import time

import numpy as np
import torch


def onnxruntime_session(onnx_file, threads=None):
    """A CPU onnxruntime session (``threads``: intra-op threads, default
    onnxruntime's)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider']
    )


def compare_with_onnxruntime(deployable, onnx_file, images):
    """Max abs difference of the scores of PyTorch and onnxruntime.

    Args:
        deployable (nn.Module): images -> scores, the exported module.
        onnx_file (str): Its ONNX graph.
        images (Tensor): (B, C, H, W) float32.

    Returns:
        float: max |scores_onnxruntime - scores_pytorch|.
    """
    session = onnxruntime_session(onnx_file)
    with torch.no_grad():
        expected = deployable(images).numpy()
    name = session.get_inputs()[0].name
    got = session.run(None, {name: images.numpy()})[0]
    if got.shape != expected.shape:
        raise RuntimeError(
            f'onnxruntime gave scores of shape {got.shape}, PyTorch '
            f'{expected.shape}.'
        )
    return float(np.abs(got - expected).max())


def _seconds(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure_latency(deployable, onnx_file, images, repeats=10, warmup=2):
    """Median seconds per forward of PyTorch (eager, no grad) and
    onnxruntime on ``images``, onnxruntime with PyTorch's thread count.

    The two alternate (one run of each per round, after ``warmup``
    rounds), so load from other jobs hits both alike.

    Returns:
        dict: ``{'pytorch': s, 'onnxruntime': s}``.
    """
    session = onnxruntime_session(onnx_file, threads=torch.get_num_threads())
    feed = {session.get_inputs()[0].name: images.numpy()}

    def run_torch():
        with torch.no_grad():
            deployable(images)

    runs = {
        'pytorch': run_torch,
        'onnxruntime': lambda: session.run(None, feed),
    }
    times = {name: [] for name in runs}
    for i in range(warmup + repeats):
        for name, run in runs.items():
            seconds = _seconds(run)
            if i >= warmup:
                times[name].append(seconds)
    return {name: float(np.median(t)) for name, t in times.items()}
