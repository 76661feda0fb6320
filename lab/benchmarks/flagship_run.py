"""The flagship's short training run in the GPU report: a generated
ImageNet-shaped folder, a random softmax teacher checkpoint, the
``--cfg-options`` of a short run, the run itself (a cold Triton cache)
and the iteration times read from its log."""

import os
import os.path as osp
import re
import sys
import time

from .parts import child_env, run_part

FLAGSHIP = 'configs/lvit/vit-b_gla_copy-distill_in1k.py'

ITERATION = re.compile(
    r'Epoch\(train\)\s*\[\d+\]\[\s*\d+/\d+\].*?\btime: ([\d.]+)'
)


def make_imagenet_folder(root, num_train=320, num_val=64, size=(160, 128)):
    """Random JPEGs in ``root/{train,val}`` with ``root/meta/{train,val}.txt``
    ("name.JPEG label" lines): the flat layout of mmpretrain's ImageNet."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    for split, count in (('train', num_train), ('val', num_val)):
        os.makedirs(osp.join(root, split), exist_ok=True)
        entries = []
        for i in range(count):
            name = f'{split}_{i:05d}.JPEG'
            pixels = rng.integers(0, 256, (size[1], size[0], 3), np.uint8)
            Image.fromarray(pixels).save(osp.join(root, split, name), 'JPEG')
            entries.append(f'{name} {i % 1000}\n')
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.writelines(entries)
    return root


def save_teacher(cfg, path):
    """Build the config's softmax teacher (random weights) and save its
    state dict as an mmpretrain checkpoint at ``path``."""
    import torch
    from mmpretrain.registry import MODELS

    import mmlvit  # noqa: F401

    torch.manual_seed(0)
    teacher = MODELS.build(cfg.model.teacher)
    torch.save(dict(state_dict=teacher.state_dict(), meta={}), path)
    return path


def flagship_options(data_root, teacher, epochs=2, batch_size=64):
    """``--cfg-options`` of the short flagship run."""
    options = dict(
        model__teacher_checkpoint=teacher,
        train_dataloader__batch_size=batch_size,
        train_dataloader__num_workers=4,
        train_cfg__max_epochs=epochs,
        train_cfg__val_interval=1000,
        optim_wrapper__dtype='bfloat16',
        default_hooks__logger__interval=1,
        default_hooks__checkpoint__interval=1000,
        default_hooks__checkpoint__save_last=False,
        log_processor__window_size=1,
    )
    for loader in ('train', 'val', 'test'):
        options[f'{loader}_dataloader__dataset__data_root'] = data_root
    return [f'{k.replace("__", ".")}={v}' for k, v in options.items()]


def flagship_command(work, data_root, teacher):
    """``tools/train.py`` of the flagship config, with ``--amp`` and the
    short run's options (its work dir in ``work``)."""
    command = [sys.executable, osp.join('tools', 'train.py'), FLAGSHIP]
    command += ['--amp', '--work-dir', osp.join(work, 'work_dir')]
    return command + ['--cfg-options'] + flagship_options(data_root, teacher)


def run_flagship(work, budget, repo_root):
    """Prepare the data and the teacher in ``work``, then train from
    ``repo_root``, all within ``budget`` seconds: :func:`~.parts.run_part`'s
    result with the command and the times (``flagship``)."""
    from mmengine.config import Config

    start = time.monotonic()
    data_root = make_imagenet_folder(osp.join(work, 'data', 'imagenet'))
    teacher = save_teacher(
        Config.fromfile(osp.join(repo_root, FLAGSHIP)),
        osp.join(work, 'data', 'teacher.pth'),
    )
    prepared = time.monotonic() - start
    command = flagship_command(work, data_root, teacher)
    # A Triton cache of its own: the first iteration is timed cold, as on
    # a fresh machine, although earlier parts compiled the same kernels.
    env = child_env(repo_root)
    env['TRITON_CACHE_DIR'] = osp.join(work, 'triton_cache')
    log = osp.join(work, 'log.txt')
    result = run_part(command, budget - prepared, log, env, repo_root)
    result['command'] = command
    first, times = iteration_times(result['lines'])
    result['flagship'] = dict(
        prepare_s=prepared,
        first_iteration_line_s=first,
        iteration_times_s=times,
    )
    result['wall_s'] += prepared
    return result


def iteration_times(lines):
    """(seconds from the start to the first training-iteration log line,
    [iteration times logged by mmengine, s]) from ``run_part``'s lines."""
    first, times = None, []
    for at, line in lines:
        match = ITERATION.search(line)
        if match:
            first = at if first is None else first
            times.append(float(match.group(1)))
    return first, times


def plot_iterations(times, path):
    from lab.benchmarks import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(times) + 1), times, marker='o')
    ax.set_yscale('log')
    ax.set_xlabel('iteration')
    ax.set_ylabel('time (s)')
    ax.set_title('Flagship training run: time of each iteration')
    ax.grid(True, which='both', alpha=0.3)
    plots.save(fig, path)
