"""Components: the groups of parameters a setting copies, named over
mmpretrain's ``ImageClassifier(VisionTransformer)`` key space.

``cls_token`` holds the tokens before the patches: the class token, a
distilled DeiT's distillation token (``dist_token``) and DINOv2's registers
(``reg_token``); ``layer_scale`` the per-channel scales
of both residual branches (``attn.gamma1``, ``ffn.gamma2``; DeiT III's
``ls1``/``ls2``); ``head`` every classifier layer (a distilled DeiT's
``head_dist`` too); ``attn_pool`` SigLIP's attention-pooling neck
(``neck.latent``, ``neck.{q,kv,proj,norm,mlp}``).
"""

import re

COMPONENTS = (
    'patch_embed',
    'pos_embed',
    'cls_token',
    'norms',
    'attn_qkv',
    'attn_proj',
    'mlp',
    'layer_scale',
    'attn_pool',
    'final_norm',
    'head',
)
_COMPONENT_OF = [
    (re.compile(pattern), component)
    for pattern, component in (
        (r'backbone\.patch_embed\.', 'patch_embed'),
        (r'backbone\.pos_embed$', 'pos_embed'),
        (r'backbone\.(cls|dist|reg)_token$', 'cls_token'),
        (r'backbone\.(layers\.\d+\.ln[12]|pre_norm)\.', 'norms'),
        (
            r'backbone\.layers\.\d+\.(attn\.gamma1|ffn\.gamma2)\.',
            'layer_scale',
        ),
        (r'backbone\.layers\.\d+\.attn\.qkv\.', 'attn_qkv'),
        (r'backbone\.layers\.\d+\.attn\.proj\.', 'attn_proj'),
        (r'backbone\.layers\.\d+\.ffn\.', 'mlp'),
        (r'neck\.(latent$|(q|kv|proj|norm|mlp)\.)', 'attn_pool'),
        (r'backbone\.ln[12]\.', 'final_norm'),
        (r'head\.', 'head'),
    )
]
OTHER = 'other'  # parameters with no softmax counterpart (gates, convs, ...)


def component_of(key: str) -> str:
    """The component of a classifier-space key (``OTHER`` if none)."""
    for pattern, component in _COMPONENT_OF:
        if pattern.match(key):
            return component
    return OTHER
