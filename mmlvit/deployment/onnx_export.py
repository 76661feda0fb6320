"""Export a :class:`~.classifier.DeployableClassifier` to ONNX with a
dynamic batch size, and name the attention operator that blocks an export.

torch.onnx's dynamo exporter (``dynamo=True``, ``torch.onnx.export``'s
default in torch 2.14; it needs ``onnxscript``) traces the model with
``torch.export``: a branch on tensor values fails instead of being frozen
into the graph, as the TorchScript-based exporter would do with only a
warning. While it
traces, the operators whose default path cannot be traced take their export
path (:func:`mmlvit.ops.common.tracing.exporting`). The spatial size is
fixed in the graph: export once per input size.
"""

import os
import os.path as osp
import traceback

import torch

from mmlvit.models.attentions import BaseAttention

DEFAULT_OPSET = 18


class OperatorExportError(RuntimeError):
    """An attention operator of the model cannot be exported.

    Attributes:
        failures (dict[str, str]): Operator class name -> reason.
    """

    def __init__(self, failures):
        self.failures = dict(failures)
        lines = [f'  {name}: {why}' for name, why in self.failures.items()]
        super().__init__(
            'Cannot export to ONNX: the attention operator(s) '
            f'{", ".join(self.failures)} cannot be traced:\n'
            + '\n'.join(lines)
            + '\nGive the operator a plain forward path for export (see '
            'mmlvit.ops.common.tracing.exporting) or use another operator.'
        )


def _onnx_program(module, args, dynamic_shapes, opset):
    return torch.onnx.export(
        module,
        args,
        dynamo=True,
        opset_version=opset,
        input_names=['images'],
        output_names=['scores'],
        dynamic_shapes=dynamic_shapes,
        verbose=False,
    )


def export_onnx(deployable, out_file, image_shape, batch_size=2, opset=None):
    """Write ``deployable`` as an ONNX graph with a dynamic batch size.

    Args:
        deployable (DeployableClassifier): images -> scores, eval mode.
        out_file (str): Where to write the ``.onnx`` file.
        image_shape (tuple[int, int, int]): (C, H, W) of the input.
        batch_size (int): Batch of the example the exporter traces (>= 2,
            so that the batch dimension stays symbolic). Defaults to 2.
        opset (int, optional): ONNX opset. Defaults to 18.

    Returns:
        str: ``out_file``.

    Raises:
        OperatorExportError: An attention operator cannot be traced; names
            the operator and the reason.
    """
    if batch_size < 2:
        raise ValueError(
            f'batch_size must be >= 2 (got {batch_size}): a batch of 1 '
            'would be fixed in the graph.'
        )
    images = torch.rand(batch_size, *image_shape) * 255
    dynamic = {'images': {0: torch.export.Dim('batch')}}
    opset = DEFAULT_OPSET if opset is None else opset
    try:
        with torch.no_grad():
            program = _onnx_program(deployable, (images,), dynamic, opset)
    except Exception as error:
        failures = unexportable_operators(deployable, images, opset)
        if failures:
            raise OperatorExportError(failures) from error
        raise
    os.makedirs(osp.dirname(osp.abspath(out_file)), exist_ok=True)
    program.save(out_file)
    return out_file


class _AttentionCall(torch.nn.Module):
    """One attention module on its recorded grid: tokens -> tokens."""

    def __init__(self, attention, hw_shape):
        super().__init__()
        self.attention, self.hw_shape = attention, tuple(hw_shape)

    def forward(self, x):
        return self.attention(x, self.hw_shape)


def _attention_inputs(model, images):
    """The first (tokens, hw_shape) each attention operator class of
    ``model`` receives on ``images``: {class: (module, x, hw_shape)}."""
    seen, handles = {}, []

    def record(module, args, kwargs):
        x, hw_shape = (list(args) + [kwargs.get('hw_shape')])[:2]
        seen.setdefault(type(module), (module, x, hw_shape))

    for module in model.modules():
        if isinstance(module, BaseAttention):
            hook = module.register_forward_pre_hook(record, with_kwargs=True)
            handles.append(hook)
    try:
        with torch.no_grad():
            model(images)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def _reason(error):
    """One line: the innermost cause of an export error and, where it
    points into mmlvit or a model file, the line that raised it."""
    while error.__cause__ is not None:
        error = error.__cause__
    message = str(error).strip().splitlines()
    text = f'{type(error).__name__}: {message[0] if message else ""}'
    frames = traceback.extract_tb(error.__traceback__)
    own = [
        f for f in frames if 'site-packages' not in osp.realpath(f.filename)
    ]
    if own:
        frame = own[-1]
        text += f' (at {frame.filename}:{frame.lineno}: {frame.line})'
    return text[:600]


def unexportable_operators(model, images, opset=DEFAULT_OPSET):
    """The attention operators of ``model`` that do not export alone.

    Each operator class is exported on the tokens it receives when
    ``model`` runs on ``images``, with the batch dynamic.

    Returns:
        dict[str, str]: Class name -> reason (empty if all export).
    """
    failures = {}
    calls = _attention_inputs(model, images)
    for cls, (module, x, hw_shape) in calls.items():
        call = _AttentionCall(module, hw_shape).eval()
        dynamic = {'x': {0: torch.export.Dim('batch')}}
        try:
            with torch.no_grad():
                torch.onnx.export(
                    call,
                    (x,),
                    dynamo=True,
                    opset_version=opset,
                    dynamic_shapes=dynamic,
                    verbose=False,
                )
        except Exception as error:
            failures[cls.__name__] = _reason(error)
    return failures
