"""Mixed precision that also runs on a machine without GPU.

mmengine's ``AmpOptimWrapper`` stops there ("only available training on
gpu, npu, mlu or musa"). :class:`MixedPrecisionOptimWrapper` is mmengine's
on an accelerator and, on the CPU, autocasts to bfloat16 without loss
scaling (bfloat16 has float32's exponent range, so small gradients do not
underflow); float16 on the CPU is refused with the fix. ``tools/train.py
--amp`` selects the mixed-precision form of the configured wrapper
(:func:`amp_type`); ``tools/test.py --amp`` autocasts the same way.
"""

import torch
from mmengine.device import (
    is_cuda_available,
    is_mlu_available,
    is_musa_available,
    is_npu_available,
)
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmpretrain.registry import OPTIM_WRAPPERS

# optim_wrapper.type -> its mixed-precision form (tools/train.py --amp).
# mmengine's wrappers are found in every scope, ours in mmpretrain's.
AMP_TYPES = {
    'OptimWrapper': 'mmpretrain.MixedPrecisionOptimWrapper',
    'AmpOptimWrapper': 'mmpretrain.SkipNonFiniteAmpOptimWrapper',
    'SkipNonFiniteOptimWrapper': 'SkipNonFiniteAmpOptimWrapper',
}


def amp_type(type_name):
    """The mixed-precision form of the optimizer wrapper ``type_name``,
    one that also runs on the CPU (a registry scope prefix, e.g.
    ``mmpretrain.`` in a dense config, is kept)."""
    scope, _, name = type_name.rpartition('.')
    prefix = scope + '.' if scope else ''
    if name in ('MixedPrecisionOptimWrapper', 'SkipNonFiniteAmpOptimWrapper'):
        return type_name
    if name in AMP_TYPES:
        target = AMP_TYPES[name]
        return target if '.' in target else prefix + target
    raise ValueError(
        f'--amp knows the mixed-precision form of {", ".join(AMP_TYPES)}, '
        f'but optim_wrapper.type is {type_name!r}: set a mixed-precision '
        'optimizer wrapper in the config instead of passing --amp.'
    )


def amp_device_available():
    """Whether mmengine's ``AmpOptimWrapper`` runs here (a GPU, NPU, MLU
    or MUSA device)."""
    return (
        is_cuda_available()
        or is_npu_available()
        or is_mlu_available()
        or is_musa_available()
    )


def amp_summary():
    """One line on what ``--amp`` does on this machine, or None where it
    is mmengine's usual float16 autocast on an accelerator."""
    if amp_device_available():
        return None
    return (
        '--amp on a machine without GPU: bfloat16 autocast on the CPU, '
        'without loss scaling (float16 mixed precision needs a GPU).'
    )


@OPTIM_WRAPPERS.register_module()
class MixedPrecisionOptimWrapper(AmpOptimWrapper):
    """mmengine's ``AmpOptimWrapper``, which also runs without an
    accelerator: there it autocasts to bfloat16 on the CPU and does not
    scale the loss.

    Args:
        loss_scale (float | str | dict): The GradScaler's setting on an
            accelerator; unused on the CPU. Defaults to 'dynamic'.
        dtype (str | torch.dtype, optional): The autocast dtype; on the
            CPU only None or bfloat16. Defaults to None (float16 on a GPU,
            bfloat16 on the CPU).
        use_fsdp (bool): ShardedGradScaler on an accelerator.
        **kwargs: ``OptimWrapper``'s arguments.
    """

    def __init__(
        self, loss_scale='dynamic', dtype=None, use_fsdp=False, **kwargs
    ):
        if amp_device_available():
            super().__init__(
                loss_scale=loss_scale, dtype=dtype, use_fsdp=use_fsdp, **kwargs
            )
            return
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype, dtype)
        if dtype not in (None, torch.bfloat16):
            raise ValueError(
                f'Mixed precision on the CPU autocasts to bfloat16, but '
                f'optim_wrapper.dtype is {dtype}: remove it or set it to '
                "'bfloat16', or train on a GPU for float16."
            )
        OptimWrapper.__init__(self, **kwargs)
        self._scale_update_param = None
        self.loss_scaler = torch.amp.GradScaler('cpu', enabled=False)
        self.cast_dtype = torch.bfloat16
