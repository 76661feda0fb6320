from .linear_encoder_layer import LinearTransformerEncoderLayer
from .linear_vit import LinearVisionTransformer
from .position_embedding import sincos_position_embedding

__all__ = [
    'LinearTransformerEncoderLayer',
    'LinearVisionTransformer',
    'sincos_position_embedding',
]
