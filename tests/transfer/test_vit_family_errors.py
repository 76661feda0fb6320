"""Files the family readers refuse: another family than the one named, a
partial match, a family the backbone cannot express yet, a wrong size, a
truncated file of each family.
Each error names the family the file resembles, the keys that do not fit
and what is missing."""

import pytest
import torch
from tiny_vit import TIMM_FAMILY_TINY, perturbed_timm_model
from vit_families import family_classifier, read, save_family, timm_model

from mmlvit.checkpoint import CheckpointError
from mmlvit.models.distillers.teacher import load_teacher_weights


@pytest.mark.parametrize(
    'family, format, message',
    [
        (
            'clip',
            'deit3',
            r'not a DeiT III checkpoint: expected a layer scale.*missing: '
            r"blocks\.N\.ls1\.gamma.*resembles CLIP: pass format='clip'",
        ),
        (
            'deit3',
            'deit-distilled',
            r'not a distilled DeiT checkpoint.*missing: dist_token, '
            r'head_dist.*resembles DeiT III',
        ),
        ('deit3', 'openai-clip', r"not a 'openai-clip'"),
        (
            'deit3',
            'siglip',
            r'not a SigLIP checkpoint: expected attn_pool.*missing: '
            r'attn_pool.*cls_token should be absent.*resembles DeiT III',
        ),
        ('siglip', 'clip', r"not a CLIP.*resembles SigLIP.*'siglip'"),
        (
            'deit3',
            'dinov2',
            r'not a DINOv2 checkpoint: expected 14-px patches.*'
            r"resembles DeiT III: pass format='deit3'",
        ),
    ],
)
def test_a_file_of_another_family_names_what_it_resembles(
    family, format, message, tmp_path
):
    path = save_family(family, tmp_path / f'{family}.pth')
    with pytest.raises(CheckpointError, match=message):
        read(path, format)


def test_partial_layer_scale_is_refused(tmp_path):
    state = dict(timm_model('deit3').state_dict())
    del state['blocks.1.ls2.gamma']
    with pytest.raises(
        CheckpointError,
        match=r'resembles DeiT III .* but only partly: it has .*'
        r"'blocks\.0\.ls1\.gamma'.* missing \['blocks\.1\.ls2\.gamma'\]",
    ):
        read(state)


def test_partial_distillation_parts_are_refused():
    state = dict(timm_model('deit-distilled').state_dict())
    del state['dist_token']
    with pytest.raises(
        CheckpointError,
        match=r"resembles a distilled DeiT .*'head_dist\.weight'.* missing "
        r'dist_token',
    ):
        read(state)


def test_families_not_supported_yet_are_named(tmp_path):
    """Meta's DINOv2-g layout: its SwiGLU MLP as w12/w3."""
    model = perturbed_timm_model(
        'vit_small_patch14_reg4_dinov2',
        **dict(TIMM_FAMILY_TINY, img_size=28, patch_size=14),
    )
    state = {
        k.replace('mlp.fc1.', 'mlp.w12.').replace('mlp.fc2.', 'mlp.w3.'): v
        for k, v in model.state_dict().items()
    }
    path = tmp_path / 'dinov2_g.pth'
    torch.save(state, path)
    with pytest.raises(
        CheckpointError,
        match=r'looks like DINOv2-g: a w12/w3 SwiGLU MLP.*blocks\.0\.mlp'
        r'\.w12\.weight.*Supported:.*DINOv3',
    ):
        read(path)


def test_a_wrong_sized_layer_scale_or_token_is_refused():
    state = dict(timm_model('deit3').state_dict())
    state['blocks.0.ls1.gamma'] = torch.ones(65)
    with pytest.raises(
        CheckpointError,
        match=r'layers\.0\.attn\.gamma1\.weight \(65,\).* do not fit the '
        r'model width 64',
    ):
        read(state)
    state = dict(timm_model('deit-distilled').state_dict())
    state['dist_token'] = torch.zeros(1, 2, 64)
    with pytest.raises(CheckpointError, match=r'dist_token \(1, 2, 64\)'):
        read(state)


def test_openai_layout_with_foreign_visual_keys_is_refused(tmp_path):
    path = save_family('clip', tmp_path / 'clip.pth', 'openai')
    state = torch.load(path, weights_only=True)
    state['visual.attnpool.q_proj.weight'] = torch.zeros(64, 64)
    with pytest.raises(
        CheckpointError,
        match=r"OpenAI/OpenCLIP.*'visual\.attnpool\.q_proj\.weight'",
    ):
        read(state)


def test_a_teacher_of_another_size_is_refused(tmp_path):
    path = save_family('deit3', tmp_path / 'deit3.pth')
    teacher, _ = family_classifier(read(path), 'SoftmaxAttention')
    load_teacher_weights(teacher, str(path))  # the right size loads
    narrow = perturbed_timm_model(
        'deit3_small_patch16_224', **dict(TIMM_FAMILY_TINY, embed_dim=32)
    )
    small, _ = family_classifier(read(narrow.state_dict()), 'SoftmaxAttention')
    with pytest.raises(
        CheckpointError,
        match=r'does not fit the teacher config: the checkpoint is 64 wide, '
        r'the teacher config 32',
    ):
        load_teacher_weights(small, str(path))


def test_a_distillation_token_needs_a_class_token():
    state = read(timm_model('deit-distilled').state_dict())
    with pytest.raises(ValueError, match='with_dist_token=True needs a class'):
        family_classifier(
            state,
            'GatedLinearAttention',
            with_cls_token=False,
            out_type='avg_featmap',
        )


@pytest.mark.parametrize(
    'drop', [('attn_pool.latent',), ('attn_pool.mlp.fc1.weight',)]
)
def test_a_partial_attention_pool_is_refused(drop):
    state = dict(timm_model('siglip').state_dict())
    for key in drop:
        del state[key]
    with pytest.raises(
        CheckpointError,
        match=rf"resembles SigLIP .*partial.*missing \['{drop[0]}'\].*"
        r'Check that the file is complete',
    ):
        read(state)


def test_attention_pool_next_to_a_class_token_is_refused():
    state = dict(timm_model('siglip').state_dict())
    state['cls_token'] = torch.zeros(1, 1, 64)
    with pytest.raises(
        CheckpointError, match=r'attention pool .* and a class token'
    ):
        read(state)


def test_a_wrong_width_latent_is_refused():
    state = dict(timm_model('siglip').state_dict())
    state['attn_pool.latent'] = torch.zeros(1, 1, 65)
    with pytest.raises(
        CheckpointError,
        match=r'neck\.latent \(1, 1, 65\).* do not fit the model width '
        r'64.*latent \(1, L, 64\)',
    ):
        read(state)


@pytest.mark.parametrize(
    'family',
    ['deit3', 'deit-distilled', 'clip', 'eva02', 'dinov2', 'dinov3', 'siglip'],
)
def test_a_truncated_file_is_refused(family, tmp_path):
    path = save_family(family, tmp_path / f'{family}.pth')
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=f'{family}.pth'):
        read(path, family)
