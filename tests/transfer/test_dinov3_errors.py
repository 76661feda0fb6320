"""DINOv3 files the readers refuse: truncated, a partial match (a
reg_token of the wrong width, layer scale in some blocks only, no class
token, a q bias without its v bias), another family than the one named,
and Meta's layout with a RoPE schedule or key-bias mask the backbone does
not rebuild. Each error names the problem and the fix."""

import pytest
import torch
from vit_families import (
    dinov2_model,
    meta_dinov3_layout,
    read,
    timm_model,
)

from mmlvit.checkpoint import CheckpointError


def dinov3_state(layout='dinov3'):
    return dict(timm_model(layout).state_dict())


@pytest.mark.parametrize(
    'edit, message',
    [
        (
            lambda s: s.update(reg_token=torch.zeros(1, 4, 65)),
            r'reg_token \(1, 4, 65\) does not fit the model: expected '
            r'\(1, R, 64\)',
        ),
        (
            lambda s: s.pop('blocks.1.gamma_2'),
            r"only partly: it has .*'blocks\.0\.gamma_1'.* missing "
            r"\['blocks\.1\.ls2\.gamma'\]",
        ),
        (
            lambda s: s.pop('cls_token'),
            r'like DINOv3, but lacks cls_token',
        ),
        (
            lambda s: s.pop('blocks.0.attn.v_bias'),
            r'resembles DINOv3 but only partly: block blocks\.0 has '
            r"\['blocks\.0\.attn\.q_bias'\] and is missing",
        ),
    ],
)
def test_bad_dinov3_files_are_refused(edit, message):
    state = dinov3_state('dinov3-qkvb')
    edit(state)
    with pytest.raises(CheckpointError, match=message):
        read(state)


def test_a_dinov2_file_read_as_dinov3_names_its_family(tmp_path):
    path = tmp_path / 'dinov2.pth'
    torch.save(dinov2_model('reg4').state_dict(), path)
    with pytest.raises(
        CheckpointError,
        match=r'not a DINOv3 checkpoint: .*missing: no pos_embed \(this '
        r"file has one\)\. It resembles DINOv2: pass format='dinov2'",
    ):
        read(path, 'dinov3')


def meta_state():
    return meta_dinov3_layout(timm_model('dinov3-qkvb').state_dict())


@pytest.mark.parametrize(
    'edit, message',
    [
        (
            lambda s: s.update({_PERIODS: s[_PERIODS] ** 2}),  # base 1e4
            r'rope_embed\.periods \[1\.0, 3\.1.* are not the base-100 '
            r'periods the backbone rebuilds',
        ),
        (
            lambda s: s[_MASK].fill_(float('nan')),
            r'blocks\.0\.attn\.qkv\.bias_mask is not 0/1 \(NaN: never '
            r'initialised\)',
        ),
        (
            lambda s: s[_MASK].fill_(1),
            r'blocks\.0\.attn\.qkv\.bias has a key bias the mask keeps',
        ),
    ],
)
def test_bad_meta_layout_files_are_refused(edit, message):
    state = meta_state()
    edit(state)
    with pytest.raises(CheckpointError, match=message):
        read(state, 'dinov3')


_PERIODS = 'rope_embed.periods'
_MASK = 'blocks.0.attn.qkv.bias_mask'
