"""Recording what a classifier's attention modules see and return."""


def attention_modules(classifier, role='model'):
    """The attention module of every block, ``backbone.layers.{i}.attn``.

    Args:
        classifier (nn.Module): An mmpretrain classifier.
        role (str): Named in the error message ('student', 'teacher').

    Returns:
        list[nn.Module]: One module per block.

    Raises:
        TypeError: The backbone has no ``layers`` or a layer no ``attn``.
    """
    backbone = getattr(classifier, 'backbone', None)
    layers = getattr(backbone, 'layers', None)
    if layers is None or not all(hasattr(layer, 'attn') for layer in layers):
        raise TypeError(
            f'The {role} ({type(backbone).__name__}) cannot be distilled: '
            'attention outputs are recorded at backbone.layers.{i}.attn, '
            'which it does not have.'
        )
    return [layer.attn for layer in layers]


class AttentionRecording:
    """A context manager that records one forward pass of a classifier.

    While active, forward hooks store, for every recorded block ``i``, the
    output of ``backbone.layers.{i}.attn`` (B, N, C) in ``outputs[i]``,
    optionally its inputs as ``(args, kwargs)`` in ``inputs[i]``, and
    optionally the head's output (B, K) in ``logits``. The hooks are removed
    on exit; the recorded tensors keep their autograd history.

    Args:
        classifier (nn.Module): An mmpretrain classifier whose blocks sit at
            ``backbone.layers.{i}``.
        blocks (list[int]): The blocks to record.
        inputs (bool): Also record the attention inputs.
        logits (bool): Also record the head's output.
        role (str): Named in error messages.

    Attributes:
        modules (list[nn.Module]): Every block's attention module.
        depth (int): Number of blocks.
        num_extra_tokens (int | None): Tokens before the patches (the class
            token), from the backbone's ``num_extra_tokens``.
    """

    def __init__(
        self, classifier, blocks, inputs=False, logits=False, role='model'
    ):
        self.modules = attention_modules(classifier, role)
        self.depth = len(self.modules)
        self.num_extra_tokens = getattr(
            classifier.backbone, 'num_extra_tokens', None
        )
        self.blocks = blocks
        self.head = classifier.head if logits else None
        self.record_inputs = inputs
        self.outputs, self.inputs, self.logits = {}, {}, None
        self._handles = []

    def __enter__(self):
        for i in self.blocks:
            self._handles.append(
                self.modules[i].register_forward_hook(
                    self._attention_hook(i), with_kwargs=True
                )
            )
        if self.head is not None:
            self._handles.append(
                self.head.register_forward_hook(self._head_hook)
            )
        return self

    def __exit__(self, *exc_info):
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _attention_hook(self, i):

        def hook(module, args, kwargs, output):
            self.outputs[i] = output
            if self.record_inputs:
                self.inputs[i] = (args, kwargs)

        return hook

    def _head_hook(self, module, args, output):
        self.logits = output
