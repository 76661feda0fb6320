from .simple_fpn import SimpleFPN

__all__ = ['SimpleFPN']
