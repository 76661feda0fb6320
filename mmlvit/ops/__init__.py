from .common.depthwise_conv import depthwise_conv
from .gla import (
    bidirectional_gla,
    bidirectional_gla_map,
    gla_chunked,
    gla_recurrent,
)
from .inline import inline_attention, inline_attention_map
from .kernel import (
    feature_map,
    kernel_attention_map,
    kernel_linear_attention,
)
from .mhla import (
    mhla_attention,
    mhla_attention_map,
    mhla_block_index,
    mhla_linear_mixing,
)
from .ttt import (
    dwconv_inner_grad,
    swiglu_inner_grads,
    ttt_dwconv,
    ttt_swiglu,
)

__all__ = [
    'bidirectional_gla',
    'bidirectional_gla_map',
    'depthwise_conv',
    'dwconv_inner_grad',
    'feature_map',
    'gla_chunked',
    'gla_recurrent',
    'inline_attention',
    'inline_attention_map',
    'kernel_attention_map',
    'kernel_linear_attention',
    'mhla_attention',
    'mhla_attention_map',
    'mhla_block_index',
    'mhla_linear_mixing',
    'swiglu_inner_grads',
    'ttt_dwconv',
    'ttt_swiglu',
]
