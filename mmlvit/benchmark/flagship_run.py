"""The flagship's short training run in the GPU report: a generated
ImageNet-shaped folder, a random softmax teacher checkpoint, the
``--cfg-options`` of a short run and the iteration times read from its log."""

import os
import os.path as osp
import re

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
    from mmlvit.benchmark import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(times) + 1), times, marker='o')
    ax.set_yscale('log')
    ax.set_xlabel('iteration')
    ax.set_ylabel('time (s)')
    ax.set_title('Flagship training run: time of each iteration')
    ax.grid(True, which='both', alpha=0.3)
    plots.save(fig, path)
