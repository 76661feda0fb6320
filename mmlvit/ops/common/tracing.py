"""Whether the current forward is being traced for export.

Some operators compute their function with constructs an exporter cannot
trace (a custom autograd Function with in-place buffers, branches on tensor
values, convolutions whose group count depends on the batch size). They
check :func:`exporting` and then take a plain path that computes the same
function from traceable ops; outside export the default path runs unchanged.
"""

import torch


def exporting() -> bool:
    """True while ``torch.export`` or ``torch.onnx.export`` (either
    exporter) traces a model."""
    return torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export()
