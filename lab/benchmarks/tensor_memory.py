"""What a training step keeps for backward, counted tensor by tensor on
any device.

During a forward with gradients, autograd keeps every tensor an op saves
for its backward (``torch.autograd.graph.saved_tensors_hooks`` sees each
one, activation checkpointing's inputs included). Their distinct storages,
parameters left out, are the activation memory a step holds when its
backward starts, where a ViT's training peak is at a large batch. The
count is exact in bytes and independent of the device and its allocator:
a CPU computes what a GPU step keeps when the forward runs the GPU's code
path (the fused kernels under Triton's interpreter).

A ViT of L blocks on a batch of B images keeps ``W(L) + B (E + L b)``: W
independent of the batch (autocast's half-precision copies of the
weights), E per image outside the blocks (patch embedding, final norm) and
b per image and block. :func:`per_image_figures` solves for E and b from
four forwards (one and two blocks, one and two images).
"""

from collections.abc import Callable

import torch
from torch import nn

MIB = 2**20


def saved_storages(forward: Callable[[], object], exclude=()) -> dict:
    """The distinct storages autograd saves during ``forward()``:
    ``{data_ptr: (bytes, dtype, shape)}`` (the shape of the first tensor
    saved from it), storages of the tensors in ``exclude`` left out."""
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    found = {}

    def pack(t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in excluded and key not in found:
            found[key] = (storage.nbytes(), t.dtype, tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    del out
    return found


def saved_mib(model: nn.Module, images: torch.Tensor, dtype) -> float:
    """MiB that a training forward of ``model`` on ``images`` under
    autocast to ``dtype`` (None: none) keeps for backward, the parameters
    and the images (which exist before the step) left out."""
    model.train()

    def forward():
        with torch.autocast(images.device.type, dtype, enabled=bool(dtype)):
            return model(images)

    exclude = [images, *model.parameters()]
    saved = saved_storages(forward, exclude)
    return sum(size for size, _, _ in saved.values()) / MIB


def per_image_figures(
    build: Callable[[int], nn.Module], size, dtype, measure=saved_mib
):
    """Per image: what a ViT keeps outside its blocks (E) and in each
    block (b), MiB, from ``measure`` (default :func:`saved_mib`) of
    ``build(1)`` and ``build(2)`` (one and two blocks) on one and two
    random ``size`` x ``size`` images.

    Args:
        measure (Callable): ``(model, images, dtype)`` -> MiB, or a dict of
            MiB by key (each key solved on its own; a key missing from a
            run counts 0 there).

    Returns:
        dict: ``per_block`` (b), ``outside_blocks`` (E) and
        ``batch_independent`` (W of one block: weight copies), MiB; for a
        dict measure, ``{key: that dict}``.
    """
    figures = {}
    for blocks in (1, 2):
        torch.manual_seed(0)
        model = build(blocks)
        for batch in (1, 2):
            images = torch.randn(batch, 3, size, size)
            figures[blocks, batch] = measure(model, images, dtype)
    if not isinstance(figures[1, 1], dict):
        return _solve(figures)
    keys = set().union(*figures.values())
    return {
        key: _solve({run: f.get(key, 0.0) for run, f in figures.items()})
        for key in keys
    }


def _solve(figures):
    """E, b and W from the four runs ``{(blocks, batch): MiB}``."""
    one = figures[1, 2] - figures[1, 1]  # E + b
    two = figures[2, 2] - figures[2, 1]  # E + 2b
    per_block = two - one
    return dict(
        per_block=per_block,
        outside_blocks=one - per_block,
        batch_independent=figures[1, 1] - one,
    )


def model_mib_per_image(figures, depth):
    """Per image, MiB kept by a ViT of ``depth`` blocks: E + depth b."""
    return figures['outside_blocks'] + depth * figures['per_block']
