"""Low-rank adapters in a staged run, in a real (tiny) mmengine Runner: only
the adapters and the named parameters train in the adapter stage, the
checkpoints are plain classifiers, a run resumed inside the adapter stage
ends where the uninterrupted one does, and misconfigured adapters stop the
run with an error saying what to fix."""

import pytest
import torch
from mmengine.runner import Runner
from mmpretrain.registry import MODELS
from test_stages import StageProbe, staged_config

# Stage 1 trains everything but the adapters; stages 2-3 train the adapters
# and the head alone.
LORA_STAGES = [dict(epochs=1), dict(epochs=2, trainable=['lora_', 'head'])]
ADAPTERS = {'model.adapters': dict(rank=2, alpha=4)}
THREE_EPOCHS = {'train_cfg.max_epochs': 3}
BATCH = torch.linspace(-1, 1, 2 * 28 * 28).reshape(2, 1, 28, 28)


@pytest.fixture(scope='module')
def setup(repo_root, fashion_mnist_root, tiny_teacher_checkpoint):
    def make(work_dir, stages=LORA_STAGES, **extra):
        cfg = staged_config(
            repo_root,
            fashion_mnist_root,
            tiny_teacher_checkpoint,
            work_dir,
            stages,
            **{**ADAPTERS, **THREE_EPOCHS},
        )
        cfg.merge_from_dict(extra)
        return cfg

    return make


@pytest.fixture(scope='module')
def lora_run(setup, tmp_path_factory):
    """An uninterrupted run: (work_dir, probe, runner)."""
    work_dir = tmp_path_factory.mktemp('lora')
    runner = Runner.from_cfg(setup(work_dir))
    probe = train(runner)
    return work_dir, probe, runner


def train(runner):
    probe = StageProbe()
    runner.register_hook(probe)
    runner.train()
    return probe


def is_adapter(name):
    return 'lora_' in name


def test_adapters_train_only_in_the_stage_that_names_them(lora_run):
    _, probe, _ = lora_run
    trained = [seen['trained'] for seen in probe.seen]
    assert len(trained) == 6
    assert trained[0] and not any(map(is_adapter, trained[0]))
    assert 'backbone.layers.0.ffn.layers.1.weight' in trained[0]
    assert trained[2] == {
        n for n in probe.weights[0] if is_adapter(n) or n.startswith('head.')
    }
    after_one, end = probe.weights[1], probe.weights[-1]
    # Stage 1 leaves the adapters at their init: lora_B zero, no update.
    assert all(
        not after_one[n].any() for n in after_one if n.endswith('lora_B')
    )
    moved = {n for n in end if not torch.equal(after_one[n], end[n])}
    assert moved == trained[2]


def test_checkpoint_is_a_plain_classifier_with_the_same_logits(
    lora_run, setup
):
    work_dir, _, runner = lora_run
    checkpoint = torch.load(work_dir / 'epoch_3.pth', weights_only=False)
    assert not any(map(is_adapter, checkpoint['state_dict']))
    assert sorted(checkpoint['unmerged_adapters'])[:3] == [
        f'backbone.layers.0.attn.proj.{t}'
        for t in ('lora_A', 'lora_B', 'weight')
    ]
    plain = MODELS.build(setup(work_dir).model.student).eval()
    plain.load_state_dict(checkpoint['state_dict'], strict=True)
    student = runner.model.student.eval()
    with torch.no_grad():
        torch.testing.assert_close(plain(BATCH), student(BATCH))


def test_resume_inside_the_adapter_stage_ends_like_the_uninterrupted_run(
    lora_run, setup, tmp_path
):
    work_dir, probe, _ = lora_run
    ckpt = work_dir / 'epoch_2.pth'
    resumed = train(
        Runner.from_cfg(setup(tmp_path, resume=True, load_from=str(ckpt)))
    )
    assert [s['iter'] for s in resumed.seen] == [4, 5]
    assert resumed.seen == probe.seen[4:]
    end = probe.weights[-1]
    assert resumed.weights[-1].keys() == end.keys()
    for name, value in end.items():
        assert torch.equal(resumed.weights[-1][name], value), name


def test_a_plain_checkpoint_loads_as_base_weights_under_fresh_adapters(
    lora_run, setup, tmp_path
):
    work_dir, _, _ = lora_run
    checkpoint = torch.load(work_dir / 'epoch_3.pth', weights_only=False)
    del checkpoint['unmerged_adapters']
    torch.save(checkpoint, tmp_path / 'plain.pth')
    runner = Runner.from_cfg(setup(tmp_path))
    runner.load_checkpoint(str(tmp_path / 'plain.pth'))
    student = runner.model.student
    qkv = student.backbone.layers[0].attn.qkv
    assert not qkv.lora_B.any()
    key = 'backbone.layers.0.attn.qkv.weight'
    assert torch.equal(qkv.weight.cpu(), checkpoint['state_dict'][key])


@pytest.mark.parametrize(
    'stages, adapters, error',
    [
        (
            [dict(epochs=3, trainable=['lora_'])],
            None,
            "stage 1: 'lora_' names adapters but the student has none: set "
            'model.adapters, e.g. dict(rank=4).',
        ),
        (
            [dict(epochs=1), dict(epochs=2, trainable=['head'])],
            dict(rank=2),
            'the student has adapters (model.adapters) but no stage trains '
            "them: add 'lora_' to a stage's trainable, e.g. "
            "trainable=['lora_', 'head'], or drop model.adapters.",
        ),
        (
            [dict(epochs=3, trainable=['qkv.lora'])],
            dict(rank=2),
            "stage 1: 'qkv.lora' matches no trainable student parameter name "
            "(adapters train only when a fragment holds 'lora_').",
        ),
    ],
)
def test_adapter_stages_that_cannot_work_are_refused(
    setup, tmp_path, stages, adapters, error
):
    runner = Runner.from_cfg(
        setup(tmp_path, stages=stages, **{'model.adapters': adapters})
    )
    with pytest.raises(ValueError) as err:
        runner.train()
    assert str(err.value) == f'ConversionStagesHook: {error}'


def test_adapters_with_ema_are_refused(setup, tmp_path):
    cfg = setup(tmp_path)
    cfg.custom_hooks.append(dict(type='EMAHook'))
    runner = Runner.from_cfg(cfg)
    with pytest.raises(ValueError, match='EMAHook cannot average a student'):
        runner.train()
