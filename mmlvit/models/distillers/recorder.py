"""Recording what a model's modules see and return during one forward pass.

What can be recorded is a table: :data:`PROBES` maps a name (``outputs``,
``inputs``, ``features``, ``logits``) to a :class:`Probe` that says which
module to hook (per block, or one for the model) and what to keep from its
call. A distillation loss names the tensors it reads in its ``records``
class attribute; the distiller records the union of its losses' names. A
loss that needs something new adds a probe to the table under a new name
(next to the loss), and reads it as ``recording.<name>``.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch.nn as nn


def attention_modules(classifier: nn.Module, role: str = 'model') -> list:
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


def _head(classifier, block, role):
    head = getattr(classifier, 'head', None)
    if head is None:
        raise ValueError(
            f'The {role} has no head, but a distillation loss reads its '
            'input (features) or output (logits).'
        )
    return head


@dataclass(frozen=True)
class Probe:
    """One recordable tensor.

    Attributes:
        module (Callable[[nn.Module, int | None, str], nn.Module]): The
            module to hook in a model, given the block index (None for a
            per-model probe) and the model's role for error messages; raises
            when the model has no such module.
        keep (Callable[[tuple, dict, Any], Any]): What to record from one
            call, given the module's ``(args, kwargs, output)``.
        per_block (bool): Recorded for every compared block (a dict
            ``{block: value}``) or once per model (a value, None until the
            module runs).
    """

    module: Callable[[nn.Module, int | None, str], nn.Module]
    keep: Callable[[tuple, dict, Any], Any]
    per_block: bool = True


#: name -> Probe; a recording has one attribute per recorded name.
PROBES: dict[str, Probe] = {
    # (B, N, C): the attention module's output, before the residual.
    'outputs': Probe(
        lambda model, i, role: attention_modules(model, role)[i],
        lambda args, kwargs, output: output,
    ),
    # The attention module's call: ((x (B, N, C), hw_shape, ...), kwargs).
    'inputs': Probe(
        lambda model, i, role: attention_modules(model, role)[i],
        lambda args, kwargs, output: (args, kwargs),
    ),
    # (B, C) as a linear head sees it: the last of the features the head is
    # called with (the backbone's class token or pooled patches, or the
    # neck's output).
    'features': Probe(
        _head, lambda args, kwargs, output: args[0][-1], per_block=False
    ),
    # (B, K): the head's output.
    'logits': Probe(
        _head, lambda args, kwargs, output: output, per_block=False
    ),
}


def check_recordable(
    model: nn.Module, records: Iterable[str], blocks: list, role: str
) -> None:
    """Raise at build time if ``model`` lacks a module a record needs.

    Raises:
        KeyError: A record has no probe in :data:`PROBES`.
        TypeError, ValueError: The model lacks the probed module.
    """
    for name in records:
        if name not in PROBES:
            raise KeyError(
                f'Nothing records {name!r}: the recordable tensors are '
                f'{sorted(PROBES)} (add a Probe to PROBES for another).'
            )
        probe = PROBES[name]
        for block in blocks if probe.per_block else [None]:
            probe.module(model, block, role)


class AttentionRecording:
    """A context manager that records one forward pass of a classifier.

    While active, forward hooks store every named record (:data:`PROBES`):
    a per-block record ``name`` of block ``i`` in ``recording.name[i]``, a
    per-model one in ``recording.name``. The hooks are removed on exit; the
    recorded tensors keep their autograd history.

    Args:
        classifier (nn.Module): An mmpretrain classifier whose blocks sit at
            ``backbone.layers.{i}``.
        blocks (list[int]): The blocks to record.
        records (Iterable[str]): The names to record. Defaults to
            ``('outputs',)``: the attention outputs (B, N, C).
        role (str): Named in error messages.

    Attributes:
        modules (list[nn.Module]): Every block's attention module.
        depth (int): Number of blocks.
        num_extra_tokens (int | None): Tokens before the patches (the class
            token), from the backbone's ``num_extra_tokens``.
    """

    def __init__(
        self,
        classifier: nn.Module,
        blocks: list,
        records: Iterable[str] = ('outputs',),
        role: str = 'model',
    ) -> None:
        self.modules = attention_modules(classifier, role)
        self.depth = len(self.modules)
        self.num_extra_tokens = getattr(
            classifier.backbone, 'num_extra_tokens', None
        )
        self.blocks = blocks
        self.records = tuple(dict.fromkeys(records))
        check_recordable(classifier, self.records, blocks, role)
        self._classifier, self._role = classifier, role
        for name in self.records:
            setattr(self, name, {} if PROBES[name].per_block else None)
        self._handles = []

    def __enter__(self) -> 'AttentionRecording':
        for name in self.records:
            probe = PROBES[name]
            for block in self.blocks if probe.per_block else [None]:
                module = probe.module(self._classifier, block, self._role)
                self._handles.append(
                    module.register_forward_hook(
                        self._hook(name, block), with_kwargs=True
                    )
                )
        return self

    def __exit__(self, *exc_info) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _hook(self, name, block):
        keep = PROBES[name].keep

        def hook(module, args, kwargs, output):
            value = keep(args, kwargs, output)
            if block is None:
                setattr(self, name, value)
            else:
                getattr(self, name)[block] = value

        return hook
