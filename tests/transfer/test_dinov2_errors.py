"""DINOv2 files the readers refuse: a partial match (a
reg_token of the wrong width, layer scale in some blocks only, registers
without a class token or layer scale, a SwiGLU MLP in some blocks only),
another family than the one named (DINOv3 too). Each error names the problem
and the fix."""

import pytest
import torch
from tiny_vit import perturbed_timm_model
from vit_families import DINOV2_TINY, dinov2_model, read

from mmlvit.checkpoint import CheckpointError


def dinov2_state(layout='reg4'):
    return dict(dinov2_model(layout).state_dict())


@pytest.mark.parametrize(
    'change, message',
    [
        (
            dict(reg_token=torch.zeros(1, 4, 32)),
            r'reg_token \(1, 4, 32\) does not fit the model: expected '
            r'\(1, R, 64\)',
        ),
        (
            dict(reg_token=torch.zeros(1, 17, 64)),
            r'reg_token \(1, 17, 64\).*1 <= R <= 16',
        ),
        (
            dict(cls_token=None),
            r'register tokens \(reg_token\) but is not DINOv2: it lacks '
            r'cls_token',
        ),
        (
            {f'blocks.{i}.ls{j}.gamma': None for i in (0, 1) for j in (1, 2)},
            r'not DINOv2: it lacks blocks\.N\.ls1\.gamma',
        ),
        (
            {'blocks.1.ls2.gamma': None},
            r'resembles DeiT III .* but only partly.* missing '
            r"\['blocks\.1\.ls2\.gamma'\]",
        ),
    ],
)
def test_partial_or_wrong_sized_dinov2_is_refused(change, message):
    state = dinov2_state()
    for key, value in change.items():
        if value is None:
            del state[key]
        else:
            state[key] = value
    with pytest.raises(CheckpointError, match=message):
        read(state)


def test_swiglu_in_some_blocks_only_is_refused():
    state = dinov2_state('giant-swiglu')
    plain = dinov2_state('reg4')
    for key in [k for k in state if k.startswith('blocks.1.mlp.')]:
        state[key] = plain[key]
    with pytest.raises(
        CheckpointError,
        match=r'packed SwiGLU MLP .* in blocks \[.0.\] but a plain MLP in '
        r'\[.1.\]',
    ):
        read(state)


def test_dinov3_read_as_dinov2_names_dinov3(tmp_path):
    """DINOv3 is read as its own family: named DINOv2, it is refused with
    the format to pass (Meta's layout too, its registers in
    storage_tokens)."""
    model = perturbed_timm_model('vit_small_patch16_dinov3', **DINOV2_TINY)
    path = tmp_path / 'dinov3.pth'
    torch.save(model.state_dict(), path)
    with pytest.raises(
        CheckpointError,
        match=r'not a DINOv2 checkpoint.*resembles DINOv3: pass '
        r"format='dinov3'",
    ):
        read(path, 'dinov2')
    state = dict(model.state_dict())
    state['storage_tokens'] = state.pop('reg_token')
    with pytest.raises(CheckpointError, match=r'resembles DINOv3: pass'):
        read(state, 'dinov2')
