"""Distillation from each new family's teacher through a real mmengine
Runner: the teacher is the family's architecture with softmax attention,
read from timm's own file (so it computes timm's function), the GLA
student starts from MLPCopy (MLPs and layer scales) and trains a few
iterations on the attention-output loss; EVA-02's and DINOv3's teacher
and student both rotate q and k (RoPE; DINOv3 has no position table).
SigLIP's student has no class token on either side: its patch tokens
alone are matched, and MLPCopy gives it the attention-pooling neck too."""

import math

import pytest
import torch
from mmengine.hooks import Hook
from mmpretrain.structures import DataSample
from tiny_runs import iter_runner
from vit_families import (
    TIMM_SIZES,
    family_classifier,
    images,
    read,
    save_family,
    timm_model,
)


class FourImages(torch.utils.data.Dataset):
    """The same four labelled 3-channel images (32 px unless ``size``)
    every epoch."""

    def __init__(self, size=32):
        self.size = size

    def __len__(self):
        return 4

    def __getitem__(self, index):
        gen = torch.Generator().manual_seed(index)
        return dict(
            inputs=torch.randn(3, self.size, self.size, generator=gen),
            data_samples=DataSample().set_gt_label(index),
        )


class Logged(Hook):
    """Every iteration's logged losses, and the student's copied tensors
    right after the init hook (which runs before this one)."""

    priority = 'LOWEST'

    def __init__(self):
        self.steps, self.initial = [], None

    def before_train(self, runner):
        self.initial = {
            k: v.detach().clone()
            for k, v in runner.model.student.state_dict().items()
        }

    def after_train_iter(self, runner, batch_idx, data_batch, outputs):
        self.steps.append({k: float(v) for k, v in outputs.items()})


@pytest.mark.parametrize(
    'family',
    ['deit3', 'deit-distilled', 'clip', 'eva02', 'dinov2', 'dinov3', 'siglip'],
)
def test_distillation_from_the_family_teacher(family, tmp_path):
    path = save_family(family, tmp_path / f'{family}.pth')
    state = read(path)
    _, teacher = family_classifier(state, 'SoftmaxAttention')
    _, student = family_classifier(state, 'GatedLinearAttention')
    logged = Logged()
    runner = iter_runner(
        dict(
            type='AttentionDistiller',
            student=student,
            teacher=teacher,
            teacher_checkpoint=str(path),
            distill_losses=[dict(type='AttentionOutputMSE', loss_weight=1.0)],
            data_preprocessor=dict(
                type='ClsDataPreprocessor',
                num_classes=10,
                mean=[0, 0, 0],
                std=[1, 1, 1],
            ),
        ),
        tmp_path / 'run',
        FourImages(TIMM_SIZES.get(family, {}).get('img_size', 32)),
        batch_size=2,
        collate='pseudo_collate',
        iters=3,
        optimizer=dict(type='AdamW', lr=1e-3),
        experiment_name=f'distill_{family}',
        custom_hooks=[
            dict(type='SoftmaxToLinearInitHook', setting='MLPCopy'),
            logged,
        ],
        randomness=dict(seed=0),
    )
    runner.train()
    # The frozen teacher is timm's model.
    teacher_model = runner.model.teacher.eval()
    x = images(family)
    with torch.no_grad():
        torch.testing.assert_close(
            teacher_model(x, mode='tensor'),
            timm_model(family)(x),
            rtol=0,
            atol=1e-5,
        )
    # MLPCopy gave the student the MLPs, layer scales and attention pool
    # before training.
    copied = [
        k
        for k in state
        if '.ffn.' in k or '.gamma1.' in k or k.startswith('neck.')
    ]
    scaled = {'deit3': 12, 'dinov2': 12, 'dinov3': 12, 'siglip': 21}
    assert len(copied) == scaled.get(family, 8)
    for key in copied:
        assert torch.equal(logged.initial[key], state[key])
    if family == 'siglip':  # patch tokens only, on both sides
        for net in (runner.model.student, teacher_model):
            assert net.backbone.cls_token is None
            assert net.backbone.num_extra_tokens == 0
    assert len(logged.steps) == 3
    for step in logged.steps:
        assert step['loss_distill'] > 0 and math.isfinite(step['loss'])
        assert 'attn_out_mse.1' in step
