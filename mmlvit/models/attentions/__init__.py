from .base import BaseAttention
from .softmax import SoftmaxAttention

__all__ = ['BaseAttention', 'SoftmaxAttention']
