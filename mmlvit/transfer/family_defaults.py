"""What a ViT's weights cannot show, by the family its reader found.

The head count: the standard ViT zoo (ViT-Ti/S/B/L/H: 3, 6, 12, 16, 16
heads; arXiv:2010.11929, arXiv:2012.12877; SigLIP's So400m, 1152 wide: 16,
arXiv:2305.13035), else 64 channels a head; DINOv3 (arXiv:2508.10104) has
64-channel heads at every width (its H+ is 1280 wide with 20 heads) but
128 in its 7B (4096 wide, 32 heads). The rotary positions (no weights):
EVA-02's are scaled to the 16 x 16 grid every release was pre-trained on
(224 px, patch 14); DINOv3's use period base 100 and patch centres
normalised to [-1, 1] per axis (timm's ``RotaryEmbeddingDinoV3`` at eval;
the coordinate shift, jitter and rescale are training-only). The
LayerNorm eps: DINOv3's is 1e-5 (the backbone's default is 1e-6). The
input normalisation of the families not trained on ImageNet's statistics:
OpenAI CLIP's for CLIP and EVA-02, 0.5 for SigLIP.
"""

# Width -> heads of the standard ViT zoo and SigLIP's So400m (1152 / 64 would
# give 18).
STANDARD_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16, 1152: 16, 1280: 16}
# DINOv3's head width is 64 but for its 7B.
DINOV3_HEADS = {4096: 32}
EVA02_ROPE = dict(type='eva02', ref_feat_shape=(16, 16))
DINOV3_ROPE = dict(type='dinov3', temperature=100)
FAMILY_ROPE = {'eva02': EVA02_ROPE, 'dinov3': DINOV3_ROPE}
DEFAULT_NORM_EPS = 1e-6  # the backbones' LayerNorm eps
FAMILY_NORM_EPS = {'dinov3': 1e-5}
# mean and std of RGB on 0-255, as a data preprocessor takes them.
_CLIP_INPUT = dict(
    mean=[122.771, 116.746, 104.094], std=[68.501, 66.632, 70.323]
)
FAMILY_INPUT_NORM = {
    'clip': _CLIP_INPUT,
    'eva02': _CLIP_INPUT,
    'siglip': dict(mean=[127.5] * 3, std=[127.5] * 3),
}


def unseen_settings(state_dict) -> dict:
    """What a read state dict's weights cannot show: its family's
    (``state_dict.family``) ``rope`` (a ``rope_cfg`` or None), ``norm_eps``
    and ``input_norm`` (mean and std, or None), overridden by what a
    Runner's config states (``state_dict.trained``, see
    :mod:`.trained_config`; also ``num_heads``, ``abs_pos_embed``)."""
    family = getattr(state_dict, 'family', None)
    return dict(
        rope=FAMILY_ROPE.get(family),
        norm_eps=FAMILY_NORM_EPS.get(family, DEFAULT_NORM_EPS),
        input_norm=FAMILY_INPUT_NORM.get(family),
    ) | getattr(state_dict, 'trained', {})


def default_num_heads(embed_dims: int, family: str | None = None):
    """Heads of the standard ViT of width ``embed_dims`` (DINOv3's for
    ``family='dinov3'``), else one per 64 channels; None when neither
    applies."""
    if family == 'dinov3' and embed_dims in DINOV3_HEADS:
        return DINOV3_HEADS[embed_dims]
    if family != 'dinov3' and embed_dims in STANDARD_HEADS:
        return STANDARD_HEADS[embed_dims]
    if embed_dims % 64 == 0:
        return embed_dims // 64
    return None
