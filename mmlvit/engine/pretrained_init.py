"""``init_cfg=dict(type='Pretrained', checkpoint=F)`` that refuses a file
that does not fit the module.

mmengine's ``PretrainedInit`` loads with ``strict=False``: a checkpoint of
another width, or a classifier file given to a backbone without
``prefix='backbone.'``, loads "successfully" with a "size mismatch" or
"missing keys" warning, and the run trains from random weights. Registered
under mmengine's name ``Pretrained``, :class:`CheckedPretrainedInit` reads
the file once, compares it with the module before loading
(:func:`mmlvit.engine.checkpoint_fit.mismatches`) and stops with an error
that names the file, the keys and the fix.
"""

import re
from collections import OrderedDict

from mmengine.logging import print_log
from mmengine.model.weight_init import PretrainedInit, update_init_info
from mmengine.registry import WEIGHT_INITIALIZERS
from mmengine.runner.checkpoint import _load_checkpoint, load_state_dict

from mmlvit.engine.checkpoint_fit import (
    CheckpointMismatchError,
    describe,
    mismatches,
    softmax_to_linear_hint,
)


@WEIGHT_INITIALIZERS.register_module(name='Pretrained', force=True)
class CheckedPretrainedInit(PretrainedInit):
    """mmengine's ``PretrainedInit`` that stops when the checkpoint does not
    fit the module.

    Tensors of another shape and module weights absent from the file are an
    error (:class:`CheckpointMismatchError`) raised before anything is
    loaded; tensors of the file that the module lacks (e.g. a classifier's
    head given to a backbone) are left to mmengine's warning.

    Args:
        checkpoint (str): The checkpoint file.
        prefix (str, optional): Load the file's tensors under this prefix
            (e.g. ``'backbone.'``) with the prefix removed.
        map_location (str): As in :func:`torch.load`. Defaults to 'cpu'.
        allow_partial (bool): Load what fits and leave the rest to mmengine's
            warnings, as mmengine does. Defaults to False.
    """

    def __init__(
        self, checkpoint, prefix=None, map_location='cpu', allow_partial=False
    ):
        super().__init__(checkpoint, prefix=prefix, map_location=map_location)
        self.allow_partial = allow_partial

    def __call__(self, module):
        where = f'{self.prefix} in model' if self.prefix else 'model'
        print_log(f'load {where} from: {self.checkpoint}', logger='current')
        state_dict = self._state_dict()
        shapes, missing, extra = mismatches(
            {k: tuple(v.shape) for k, v in state_dict.items()}, module
        )
        if (shapes or missing) and not self.allow_partial:
            raise CheckpointMismatchError(
                self._mismatch_message(module, shapes, missing, extra)
            )
        load_state_dict(module, state_dict, strict=False, logger='current')
        if hasattr(module, '_params_init_info'):
            update_init_info(module, init_info=self._get_init_info())

    def _state_dict(self):
        """The file's tensors as the module names them: ``state_dict`` of a
        checkpoint, ``module.`` removed, only those under ``prefix``."""
        checkpoint = _load_checkpoint(
            self.checkpoint, map_location=self.map_location, logger='current'
        )
        if not isinstance(checkpoint, dict):
            raise CheckpointMismatchError(
                f'init_cfg Pretrained checkpoint {self.checkpoint} holds '
                f'{type(checkpoint).__name__}, not a dict of tensors.'
            )
        state_dict = checkpoint.get('state_dict', checkpoint)
        metadata = getattr(state_dict, '_metadata', OrderedDict())
        state_dict = OrderedDict(
            (re.sub(r'^module\.', '', k), v) for k, v in state_dict.items()
        )
        if self.prefix:
            prefix = self.prefix.rstrip('.') + '.'
            state_dict = OrderedDict(
                (k[len(prefix) :], v)
                for k, v in state_dict.items()
                if k.startswith(prefix)
            )
            if not state_dict:
                raise CheckpointMismatchError(
                    f'init_cfg Pretrained checkpoint {self.checkpoint} has '
                    f"no tensor under prefix='{prefix}'. Check the prefix "
                    "(a classifier's backbone is under 'backbone.'), or "
                    'remove it when the file holds the module alone.'
                )
        state_dict._metadata = metadata
        return state_dict

    def _mismatch_message(self, module, shapes, missing, extra):
        prefix = f", prefix='{self.prefix}'" if self.prefix else ''
        hint = softmax_to_linear_hint(
            module, shapes, missing, extra, self.checkpoint
        )
        return (
            f"init_cfg=dict(type='Pretrained', checkpoint="
            f"'{self.checkpoint}'{prefix}) does not fit the "
            f'{type(module).__name__} it initialises: '
            f'{describe(shapes, missing, extra)}. Loaded anyway, those '
            'weights would keep their random initialisation. Give the '
            'checkpoint of this architecture (width, depth, heads, patch '
            'size), or the prefix under which the file holds this module '
            f"(e.g. prefix='backbone.'). {hint + ' ' if hint else ''}To load "
            'only the matching tensors on purpose, add allow_partial=True '
            'to that init_cfg.'
        )
