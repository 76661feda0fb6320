"""The classification grid: its runs, the teacher (trained once if
missing), and one run trained and tested."""

import dataclasses
import os
import os.path as osp
import time

import torch

from mmlvit.transfer import components_text, spec_policy

from ..configs import DEFAULT_TEACHER, ROOT, SOFTMAX, split_setting
from ..records import append_result, read_results
from ..runner import MissingTeacherError, device, train_then_test
from .configs import (
    SOFTMAX_INIT,
    TEACHER_CONFIG,
    limit_data,
    run_config,
    teacher_config,
)
from .records import Run, RunResult


def grid(operators, settings, distill, lambdas, epochs, seeds, targets):
    """Every run the arguments ask for, seed by seed (all of seed 0 first).

    The softmax reference is run once per target (without distillation),
    whatever the operators; runs without distillation have lambda 0.

    Returns:
        list[Run]
    """
    runs = []
    for seed in seeds:
        for target in targets:
            for operator in operators:
                for entry in settings:
                    setting, modes = split_setting(entry, distill)
                    softmax = setting == SOFTMAX
                    for distilled in modes:
                        if softmax and (distilled or operator != operators[0]):
                            continue  # one softmax reference per target
                        for lam in lambdas if distilled else [0]:
                            runs.extend(
                                Run(
                                    dataset=target,
                                    operator=SOFTMAX if softmax else operator,
                                    setting=setting,
                                    distill=distilled,
                                    lam=float(lam),
                                    epochs=n,
                                    seed=seed,
                                )
                                for n in epochs
                            )
    return runs


def reuse_results(sources, runs, out) -> int:
    """Copy into the CSV ``out`` the results of ``runs`` that the CSVs
    ``sources`` hold (the same key: target, operator, setting, distillation,
    lambda, epochs, seed) and ``out`` does not, with the components their
    setting copies; return how many. The caller makes sure the sources
    were trained as this grid trains (full data, the shipped teacher).
    """
    done = {r.run.key() for r in read_results(out, RunResult)}
    wanted = {run.key() for run in runs} - done
    copied = 0
    for source in sources:
        for result in read_results(source, RunResult):
            key = result.run.key()
            if key not in wanted:
                continue
            if not result.components:  # a CSV older than the column
                result = dataclasses.replace(
                    result, components=_components(result.run.setting)
                )
            append_result(out, result)
            wanted.discard(key)
            copied += 1
    return copied


def _components(setting: str) -> str:
    """The components a setting copies, as the CSV writes them."""
    spec = SOFTMAX_INIT.lower() if setting == SOFTMAX else setting
    return components_text(spec_policy(spec).components)


def check_reusable(args) -> None:
    """``--reuse`` takes results trained as this grid trains: refused with
    a subset of the data or another teacher.

    Raises:
        SystemExit: It is combined with ``--train-indices``,
            ``--test-indices`` or another ``--teacher``.
    """
    if not args.reuse:
        return
    if args.train_indices or args.test_indices:
        raise SystemExit(
            '--reuse copies results on the full data: drop '
            '--train-indices/--test-indices or --reuse.'
        )
    if osp.abspath(args.teacher) != osp.abspath(DEFAULT_TEACHER):
        raise SystemExit(
            '--reuse copies results of the shipped teacher: '
            'drop --teacher or --reuse.'
        )


def train_and_test(run, teacher, work_root, train_indices, test_indices):
    """Build, train and test one run on the target's test split."""
    cfg = run_config(run, teacher, osp.join(work_root, run.name))
    limit_data(cfg, train_indices, test_indices)
    trained, metrics, train_s, test_s = train_then_test(cfg)
    top1 = float(metrics['accuracy/top1'])
    copied = components_text(copied_components(trained))
    return RunResult(run, top1, train_s + test_s, device(), copied)


def copied_components(trained) -> tuple:
    """The components the init hook of a trained Runner copied (its
    policy's list; none without a hook)."""
    from mmlvit.engine.hooks import SoftmaxToLinearInitHook

    hooks = [
        h for h in trained.hooks if isinstance(h, SoftmaxToLinearInitHook)
    ]
    return hooks[0].policy.components if hooks else ()


def ensure_teacher(
    path, work_root, train=False, train_indices=None, test_indices=None
):
    """The teacher checkpoint: the file at ``path``; or, when it is missing
    and ``train`` is set, train it once with the teacher config and keep its
    weights (state dict only) there.

    Raises:
        MissingTeacherError: No file at ``path`` and ``train`` is False.
    """
    if osp.isfile(path):
        return path
    if not train:
        raise MissingTeacherError(
            f'No teacher checkpoint at {path}. Check the --teacher path, or '
            'pass --train-teacher to train a new teacher and save it there '
            '(about 13 minutes on 2 CPU cores with the full data).'
        )
    print(f'No teacher at {path}: training it with {TEACHER_CONFIG}')
    cfg = teacher_config(osp.join(work_root, 'teacher'))
    limit_data(cfg, train_indices, test_indices)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].persistent_workers = cfg[loader].num_workers > 0
    started = time.time()
    runner, metrics, _, _ = train_then_test(cfg)
    wall = time.time() - started
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    state = {
        k: v.detach().clone() for k, v in runner.model.state_dict().items()
    }
    torch.save(
        {
            'state_dict': state,
            'meta': {
                'fashion_mnist_test_top1': metrics['accuracy/top1'],
                'config': osp.relpath(TEACHER_CONFIG, ROOT),
                'train_wall_s': round(wall, 1),
                'torch_threads': torch.get_num_threads(),
            },
        },
        path,
    )
    print(
        f'Teacher: {metrics["accuracy/top1"]:.2f}% on the Fashion-MNIST '
        f'test split after {wall / 60:.1f} min, saved to {path}'
    )
    return path
