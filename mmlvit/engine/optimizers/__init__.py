"""Optimiser constructors and wrappers (registered in mmpretrain's
``OPTIM_WRAPPER_CONSTRUCTORS`` and ``OPTIM_WRAPPERS``)."""

from .conversion_optim import ConversionAwareOptimWrapperConstructor
from .layer_decay import BackboneLayerDecayOptimWrapperConstructor
from .mixed_precision import MixedPrecisionOptimWrapper
from .skip_nonfinite import (
    GuardedAmpOptimWrapper,
    SkipNonFiniteAmpOptimWrapper,
    SkipNonFiniteOptimWrapper,
)

__all__ = [
    'BackboneLayerDecayOptimWrapperConstructor',
    'ConversionAwareOptimWrapperConstructor',
    'GuardedAmpOptimWrapper',
    'MixedPrecisionOptimWrapper',
    'SkipNonFiniteAmpOptimWrapper',
    'SkipNonFiniteOptimWrapper',
]
