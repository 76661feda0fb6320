"""Low-rank adapters (LoRA, Hu et al. 2021) on a model's linear layers, and
the state-dict conversions that merge them into plain weights and back."""

import math
import re
from collections.abc import Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

ADAPTER_MARK = 'lora_'
ADAPTER_TENSORS = ('lora_A', 'lora_B')
DEFAULT_TARGETS = ('attn.qkv', 'attn.proj')
# The checkpoint key of the adapted layers' unmerged tensors.
UNMERGED_ADAPTERS = 'unmerged_adapters'
# A layer index inside a qualified name: layers.3.attn -> layers.*.attn
BLOCK_INDEX = re.compile(r'(?<=\.)\d+(?=\.)')


class LoRALinear(nn.Linear):
    """A linear layer plus a trainable low-rank update:
    ``y = x W^T + b + (alpha / r) (x A^T) B^T``.

    ``weight`` and ``bias`` are the Parameter objects of the linear layer it
    wraps (nothing is copied), so the layer keeps that layer's parameter
    names and the optimizer or init code holding them still sees them.
    ``lora_B`` starts at zero: at init the layer computes exactly what the
    wrapped linear computes.

    Args:
        linear (nn.Linear): The layer to adapt, with weight (out, in).
        rank (int): r, the rank of the update (>= 1).
        alpha (float): The update is scaled by ``alpha / rank``.

    Attributes:
        lora_A (Parameter): (r, in), kaiming-uniform init.
        lora_B (Parameter): (out, r), zeros.
        scale (float): alpha / r.
    """

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        # nn.Module's init alone: nn.Linear's would allocate a new weight.
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        weight = linear.weight
        self.lora_A = nn.Parameter(
            torch.empty(
                rank,
                self.in_features,
                dtype=weight.dtype,
                device=weight.device,
            )
        )
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(
            torch.zeros(
                self.out_features,
                rank,
                dtype=weight.dtype,
                device=weight.device,
            )
        )
        self.rank = rank
        self.alpha = alpha
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) -> (..., out)."""
        update = F.linear(F.linear(x, self.lora_A), self.lora_B)
        return F.linear(x, self.weight, self.bias) + self.scale * update

    def extra_repr(self) -> str:
        return (
            f'{super().extra_repr()}, rank={self.rank}, alpha={self.alpha:g}'
        )


def add_adapters(
    model: nn.Module,
    targets: Sequence[str] = DEFAULT_TARGETS,
    rank: int = 4,
    alpha: float | None = None,
) -> list[str]:
    """Replace linear layers of ``model`` by :class:`LoRALinear`, in place.

    Args:
        model (nn.Module): The model, e.g. a classifier.
        targets (Sequence[str]): Name endings: every ``nn.Linear`` whose
            qualified name is a target or ends with ``'.' + target`` gets
            adapters. Defaults to the attention projections
            ``('attn.qkv', 'attn.proj')``.
        rank (int): The adapters' rank r (>= 1). Defaults to 4.
        alpha (float, optional): The update's scale is ``alpha / rank``.
            Defaults to ``rank`` (scale 1).

    Returns:
        list[str]: The qualified names of the adapted layers.

    Raises:
        ValueError: ``rank`` < 1, ``alpha`` <= 0, no targets, a target that
            matches no linear layer, or a layer that has adapters already.
    """
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(f'adapters: rank={rank!r} is not an integer >= 1.')
    alpha = rank if alpha is None else alpha
    if not alpha > 0:
        raise ValueError(f'adapters: alpha={alpha!r} is not > 0.')
    if not targets:
        raise ValueError('adapters: targets is empty.')
    linears = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
    }
    chosen = {}
    for target in targets:
        matched = [
            name
            for name in linears
            if name == target or name.endswith('.' + target)
        ]
        if not matched:
            layouts = sorted({BLOCK_INDEX.sub('*', name) for name in linears})
            raise ValueError(
                f"adapters: target '{target}' matches no nn.Linear of the "
                'model (a target is the end of a layer name, e.g. attn.qkv; '
                f'its linear layers: {", ".join(layouts)}).'
            )
        chosen.update(dict.fromkeys(matched))
    for name in chosen:
        if isinstance(linears[name], LoRALinear):
            raise ValueError(f'adapters: {name} has adapters already.')
        parent, _, child = name.rpartition('.')
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, child, LoRALinear(linears[name], rank, alpha))
    return list(chosen)


def adapter_scales(model: nn.Module) -> dict[str, float]:
    """The qualified name and ``alpha / rank`` of each :class:`LoRALinear`
    of ``model`` (empty when it has none)."""
    return {
        name: module.scale
        for name, module in model.named_modules()
        if isinstance(module, LoRALinear)
    }


def merge_adapters(
    state_dict: Mapping[str, torch.Tensor], scales: Mapping[str, float]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A plain state dict with the adapters merged into the weights, and
    the tensors that undo the merge.

    Each adapted layer ``name`` (a key of ``scales``) has
    ``name.weight`` W (out, in), ``name.lora_A`` A (r, in) and
    ``name.lora_B`` B (out, r); its merged weight is
    ``W + scale * B @ A`` (computed in float32, stored in W's dtype).

    Args:
        state_dict (Mapping[str, Tensor]): A state dict with adapters, e.g.
            a student's with :class:`LoRALinear` layers.
        scales (Mapping[str, float]): :func:`adapter_scales` of the model.

    Returns:
        tuple[dict, dict]: The plain state dict (no ``lora_`` keys), which
        loads into the model without adapters, and the unmerged tensors
        (each adapted layer's W, A and B), with which
        :func:`unmerge_adapters` gives back ``state_dict`` exactly.

    Raises:
        ValueError: An adapter tensor is missing, or the state dict has
            adapter tensors of a layer not in ``scales``.
    """
    plain = dict(state_dict)
    unmerged = {}
    for name, scale in scales.items():
        keys = [f'{name}.{tensor}' for tensor in ('weight', *ADAPTER_TENSORS)]
        missing = [key for key in keys if key not in plain]
        if missing:
            raise ValueError(
                f'merge_adapters: the state dict lacks {", ".join(missing)}.'
            )
        weight, lora_a, lora_b = (plain[key] for key in keys)
        update = lora_b.float() @ lora_a.float()
        merged = (weight.float() + scale * update).to(weight.dtype)
        unmerged.update((key, plain.pop(key)) for key in keys)
        plain[keys[0]] = merged
    unknown = [key for key in plain if ADAPTER_MARK in key.rpartition('.')[2]]
    if unknown:
        raise ValueError(
            f'merge_adapters: {", ".join(unknown)} belong to no adapted '
            'layer of scales.'
        )
    return plain, unmerged


def unmerge_adapters(
    plain: Mapping[str, torch.Tensor], unmerged: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The state dict with adapters that :func:`merge_adapters` turned into
    ``plain`` and ``unmerged``: each adapted layer's merged weight is
    replaced by its unmerged W, and its A and B are added back.

    Raises:
        ValueError: ``unmerged`` holds a weight that ``plain`` lacks.
    """
    orphans = [
        key
        for key in unmerged
        if ADAPTER_MARK not in key.rpartition('.')[2] and key not in plain
    ]
    if orphans:
        raise ValueError(
            f'unmerge_adapters: {", ".join(orphans)} is not in the plain '
            'state dict.'
        )
    return {**plain, **unmerged}


def save_merged(checkpoint: dict, model: nn.Module) -> None:
    """Make a checkpoint of ``model`` plain, in place: ``state_dict`` gets
    the adapters merged (:func:`merge_adapters`) and the unmerged tensors go
    under ``checkpoint['unmerged_adapters']``. Nothing changes when
    ``model`` has no adapters.

    Args:
        checkpoint (dict): As the runner saves it, ``state_dict`` keyed
            like ``model``'s own.
        model (nn.Module): The model with :class:`LoRALinear` layers.
    """
    scales = adapter_scales(model)
    if scales:
        plain, unmerged = merge_adapters(checkpoint['state_dict'], scales)
        checkpoint['state_dict'] = plain
        checkpoint[UNMERGED_ADAPTERS] = unmerged


def restore_unmerged(checkpoint: dict, model: nn.Module) -> None:
    """Undo :func:`save_merged` on a loaded checkpoint, in place, so that it
    loads into ``model`` exactly as it was saved. A file without unmerged
    tensors (a plain classifier) gets ``model``'s current adapter tensors:
    its weights become the base weights, under fresh adapters (``lora_B``
    zero: no update). Nothing changes when ``model`` has no adapters.
    """
    if not adapter_scales(model):
        return
    if UNMERGED_ADAPTERS in checkpoint:
        checkpoint['state_dict'] = unmerge_adapters(
            checkpoint['state_dict'], checkpoint.pop(UNMERGED_ADAPTERS)
        )
        return
    state = checkpoint.get('state_dict', checkpoint)
    for name, tensor in model.state_dict().items():
        if ADAPTER_MARK in name.rpartition('.')[2]:
            state.setdefault(name, tensor.detach().cpu().clone())
