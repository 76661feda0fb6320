from .attention_pooling import AttentionPoolingNeck
from .simple_fpn import SimpleFPN

__all__ = ['AttentionPoolingNeck', 'SimpleFPN']
