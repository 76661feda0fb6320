from .base import BaseAttention
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
    'InLineAttention',
    'KernelLinearAttention',
    'MHLAttention',
    'ReLULinearAttention',
    'SoftmaxAttention',
    'TTTAttention',
]
