from .base import BaseAttention, registered_operators
from .gla import GatedLinearAttention
from .inline import InLineAttention
from .kernel import (
    ELULinearAttention,
    KernelLinearAttention,
    ReLULinearAttention,
)
from .mhla import MHLAttention
from .softmax import SoftmaxAttention
from .ttt import TTTAttention

__all__ = [
    'BaseAttention',
    'ELULinearAttention',
    'GatedLinearAttention',
    'InLineAttention',
    'KernelLinearAttention',
    'MHLAttention',
    'ReLULinearAttention',
    'SoftmaxAttention',
    'TTTAttention',
    'registered_operators',
]
