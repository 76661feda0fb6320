"""The family leaf configs compute their source family's function: each
config, shrunk to the tiny test shape, builds its distiller with a tiny timm
file of that family as the teacher checkpoint; the teacher's features then
equal timm's, and the init hook's setting copies into the student."""

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from tiny_vit import TIMM_FAMILY_TINY
from vit_families import IMAGES, save_family, timm_model

import mmlvit  # noqa: F401
from mmlvit.transfer import apply_init, load_softmax_checkpoint

# leaf config -> the family (tests/vit_families.py) its teacher is.
FAMILY_CONFIGS = {
    'configs/lvit/vit-b16-clip_gla_mlpcopy-distill_in1k.py': 'clip',
    'configs/lvit/vit-b16-siglip_gla_mlpcopy-distill_in1k.py': 'siglip',
    'configs/lvit/vit-s14-reg4-dinov2_gla_mlpcopy-distill_in1k.py': 'dinov2',
}
TINY_ARCH = dict(
    embed_dims=TIMM_FAMILY_TINY['embed_dim'],
    num_layers=TIMM_FAMILY_TINY['depth'],
    num_heads=TIMM_FAMILY_TINY['num_heads'],
    feedforward_channels=4 * TIMM_FAMILY_TINY['embed_dim'],
)


def tiny_distiller(path, checkpoint):
    """The config's distiller at the tiny family shape, its teacher read
    from ``checkpoint``."""
    init_default_scope('mmpretrain')
    model = Config.fromfile(path).model
    for role in ('student', 'teacher'):
        model[role].backbone.update(
            arch=TINY_ARCH,
            img_size=TIMM_FAMILY_TINY['img_size'],
            patch_size=TIMM_FAMILY_TINY['patch_size'],
        )
    model.student.head.in_channels = TINY_ARCH['embed_dims']
    for role in ('student', 'teacher'):
        if model[role].get('neck'):  # SigLIP's attention pooling
            model[role].neck.update(
                in_channels=TINY_ARCH['embed_dims'],
                num_heads=TINY_ARCH['num_heads'],
                feedforward_channels=TINY_ARCH['feedforward_channels'],
            )
    model.teacher_checkpoint = str(checkpoint)
    return MODELS.build(model)


@pytest.mark.parametrize('path', sorted(FAMILY_CONFIGS))
def test_family_config_teacher_is_the_family(path, tmp_path):
    family = FAMILY_CONFIGS[path]
    checkpoint = save_family(family, tmp_path / f'{family}.pth')
    distiller = tiny_distiller(path, checkpoint)
    source = timm_model(family)
    with torch.no_grad():
        features = distiller.teacher(IMAGES, mode='tensor')[-1]
        expected = source.forward_head(
            source.forward_features(IMAGES), pre_logits=True
        )
    torch.testing.assert_close(features, expected, rtol=0, atol=1e-5)
    # The config's setting copies the family's MLPs into its student.
    hook = Config.fromfile(path).custom_hooks[0]
    state = load_softmax_checkpoint(str(checkpoint))
    apply_init(distiller.student, state, hook['setting'])
    student = distiller.student.state_dict()
    copied = [k for k in state if '.ffn.' in k]
    assert copied
    for key in copied:
        assert torch.equal(student[key], state[key]), key
