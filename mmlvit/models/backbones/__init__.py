from .linear_vit import (
    LinearTransformerEncoderLayer,
    LinearVisionTransformer,
    sincos_position_embedding,
)

__all__ = [
    'LinearTransformerEncoderLayer',
    'LinearVisionTransformer',
    'sincos_position_embedding',
]
