"""Small-scale reproduction of the paper's result matrix.

Students (the tiny ViT's shapes with a linear operator) start from the tiny
softmax teacher pre-trained on Fashion-MNIST under one of the paper's
initialisation settings, with or without attention-output distillation, and
are trained and evaluated on a target: the Fashion-MNIST 5k subset (tested
on the 10k test split) or MNIST-5k (4k/1k). Every run is a real mmengine
Runner built from the configs under configs/fashion_mnist and
configs/_base_.

Each finished run appends one row to the CSV; a re-run of the same command
skips the rows already there, so a half-finished grid resumes. Runs go seed
by seed (every configuration of seed 0 first), and ``--jobs N`` trains N runs
at once in worker processes of ``--threads`` threads each. A plot is written
next to the CSV: bars in the style of the paper's Fig. 4 (per setting, the
distillation gain stacked, the softmax reference dashed), or top-1 against
lambda / epochs when the grid sweeps those.

Examples:
    # the paper's grid for two operators, 3 seeds, on Fashion-MNIST-5k
    python tools/analysis/reproduce.py --operators relu gla \\
        --settings random attncopy mlpcopy fullcopy softmax --distill both \\
        --seeds 0 1 2 --out results/fashion_mnist.csv
    # a lambda sweep for MLPCopy + distill
    python tools/analysis/reproduce.py --operators relu \\
        --settings mlpcopy+distill --lambdas 5 10 30 50 100 \\
        --out results/lambda.csv
    # only train the teacher (kept at --teacher)
    python tools/analysis/reproduce.py --teacher-only

A setting named ``NAME+distill`` is that setting with distillation only,
whatever ``--distill`` says (e.g. ``--settings random mlpcopy+distill``).
"""

import argparse
import csv
import multiprocessing
import os
import os.path as osp
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.runner import Runner
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401  (registers the modules)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIGS = osp.join(ROOT, 'configs', 'fashion_mnist')
TEACHER_CONFIG = osp.join(CONFIGS, 'vit-tiny-p4_softmax_fashion-mnist.py')
STUDENT_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_random_fashion-mnist-5k.py'
)
DISTILL_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'
)
DEFAULT_TEACHER = osp.join(
    ROOT, 'checkpoints', 'vit-tiny-p4_softmax_fashion-mnist.pth'
)

# name: attention config. The tiny ViT has 50 tokens: GLA's PyTorch scan
# runs fastest there in chunks of 16 (the function does not depend on the
# chunk size).
OPERATORS = {
    'elu': dict(type='ELULinearAttention'),
    'relu': dict(type='ReLULinearAttention'),
    'inline': dict(type='InLineAttention'),
    'gla': dict(type='GatedLinearAttention', chunk_size=16),
    'mhla': dict(type='MHLAttention'),
    'ttt': dict(type='TTTAttention'),
}
# setting name: the SoftmaxToLinearInitHook policy (None: nothing copied).
SETTINGS = {
    'random': None,
    'attncopy': 'Copy',
    'mlpcopy': 'MLPCopy',
    'fullcopy': 'FullCopy',
    'softmax': 'FullCopy',  # the softmax model itself, fine-tuned
}
TARGETS = {
    'fashion-mnist-5k': osp.join(
        ROOT, 'configs/_base_/datasets/fashion_mnist-5k_bs64.py'
    ),
    'mnist-5k': osp.join(ROOT, 'configs/_base_/datasets/mnist5k_bs64.py'),
}
FIELDS = (
    'dataset',
    'operator',
    'setting',
    'distill',
    'lambda',
    'epochs',
    'seed',
    'top1',
    'wall_s',
    'device',
)


def run_key(row):
    """What identifies a run in the CSV (all fields but the results)."""
    return tuple(
        str(row[f]) for f in FIELDS if f not in ('top1', 'wall_s', 'device')
    )


def read_rows(path):
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def append_row(path, row):
    new = not osp.isfile(path)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'a', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def run_config(
    target, operator, setting, distill, lam, epochs, seed, teacher, work_dir
):
    """The mmengine config of one run."""
    if setting == 'softmax':
        cfg = Config.fromfile(TEACHER_CONFIG)
        model = cfg.model
    else:
        cfg = Config.fromfile(DISTILL_CONFIG if distill else STUDENT_CONFIG)
        model = cfg.model.student if distill else cfg.model
        attn = OPERATORS[operator]
        model.backbone.attn_cfg = dict(attn)
        if MODELS.get(attn['type']).patch_tokens_only:
            model.backbone.update(
                with_cls_token=False,
                out_type='avg_featmap',
                pos_embed_type='sincos',
            )
    # Every run trains on the target's data with the target's test split as
    # its (final) evaluation.
    data = Config.fromfile(TARGETS[target])
    for key in (
        'data_preprocessor',
        'train_dataloader',
        'val_dataloader',
        'test_dataloader',
        'val_evaluator',
        'test_evaluator',
    ):
        cfg[key] = data[key]
    if distill:
        cfg.model.teacher_checkpoint = teacher
        cfg.model.distill_losses[0].loss_weight = float(lam)
    hooks = [
        h
        for h in cfg.get('custom_hooks', [])
        if h.type != 'SoftmaxToLinearInitHook'
    ]
    if SETTINGS[setting] is not None:
        hooks.append(
            dict(
                type='SoftmaxToLinearInitHook',
                checkpoint=teacher,
                setting=SETTINGS[setting],
            )
        )
    if operator == 'mhla' and setting != 'softmax':
        hooks.append(dict(type='MHLAMixingClampHook'))
    cfg.custom_hooks = hooks
    cfg.train_cfg = dict(by_epoch=True, max_epochs=epochs, val_interval=epochs)
    warmup = min(1, epochs - 1)  # one warm-up epoch, none in 1-epoch runs
    cfg.param_scheduler = [
        dict(
            type='LinearLR',
            start_factor=1e-3,
            by_epoch=True,
            begin=0,
            end=warmup,
            convert_to_iter_based=True,
        ),
        dict(
            type='CosineAnnealingLR',
            eta_min=1e-6,
            by_epoch=True,
            begin=warmup,
            end=epochs,
            convert_to_iter_based=True,
        ),
    ][0 if warmup else 1 :]
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=-1)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=20)
    cfg.randomness = dict(seed=seed)
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'test_dataloader'):
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    return cfg


def run_one(cfg):
    """Train, then evaluate on the target's test split; return top-1 %."""
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    MMLogger._instance_dict.clear()  # one log file per run
    return float(metrics['accuracy/top1'])


def limit_data(cfg, train_indices=None, test_indices=None):
    """Use only the first images of the splits (quick checks)."""
    if train_indices:
        cfg.train_dataloader.dataset.indices = train_indices
    for loader in ('val_dataloader', 'test_dataloader'):
        if test_indices and cfg.get(loader):
            cfg[loader].dataset.indices = test_indices


def ensure_teacher(path, work_root, train_indices=None, test_indices=None):
    """The teacher checkpoint: reuse the file, or train it once with the
    teacher config and keep its weights (state dict only) at ``path``."""
    if osp.isfile(path):
        return path
    print(f'No teacher at {path}: training it with {TEACHER_CONFIG}')
    cfg = Config.fromfile(TEACHER_CONFIG)
    cfg.work_dir = osp.join(work_root, 'teacher')
    limit_data(cfg, train_indices, test_indices)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].persistent_workers = cfg[loader].num_workers > 0
    started = time.time()
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    wall = time.time() - started
    MMLogger._instance_dict.clear()
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


def split_setting(name, distill):
    """(setting, distillation modes) of a ``--settings`` entry."""
    modes = dict(off=[False], on=[True], both=[False, True])[distill]
    if name.endswith('+distill'):
        return name[: -len('+distill')], [True]
    return name, modes


def grid(args):
    """All runs the arguments ask for, as CSV rows without results, seed by
    seed (all of seed 0 first)."""
    for seed in args.seeds:
        for target in args.targets:
            for operator in args.operators:
                for entry in args.settings:
                    setting, modes = split_setting(entry, args.distill)
                    for distill in modes:
                        if setting == 'softmax' and (
                            distill or operator != args.operators[0]
                        ):
                            continue  # one softmax reference per target
                        for lam in args.lambdas if distill else [0]:
                            for epochs in args.epochs:
                                yield dict(
                                    dataset=target,
                                    operator='softmax'
                                    if setting == 'softmax'
                                    else operator,
                                    setting=setting,
                                    distill=int(distill),
                                    **{'lambda': lam},
                                    epochs=epochs,
                                    seed=seed,
                                )


def summarise(rows):
    """Mean, std and count of top-1 per run configuration (seeds pooled)."""
    groups = defaultdict(list)
    for row in rows:
        key = (
            row['dataset'],
            row['operator'],
            row['setting'],
            int(row['distill']),
            float(row['lambda']),
            int(row['epochs']),
        )
        groups[key].append(float(row['top1']))
    table = []
    for key, values in sorted(groups.items()):
        t = torch.tensor(values)
        std = t.std().item() if len(values) > 1 else 0.0
        table.append((*key, t.mean().item(), std, len(values)))
    return table


def print_table(rows):
    print(
        f'{"dataset":18} {"operator":9} {"setting":9} {"distill":7} '
        f'{"lambda":>6} {"epochs":>6} {"top1 mean":>9} {"std":>5} {"n":>2}'
    )
    for data, op, setting, distill, lam, epochs, mean, std, n in summarise(
        rows
    ):
        print(
            f'{data:18} {op:9} {setting:9} {"yes" if distill else "no":7} '
            f'{lam:6g} {epochs:6d} {mean:9.2f} {std:5.2f} {n:2d}'
        )


SETTING_TITLES = dict(
    random='Random', attncopy='Copy', mlpcopy='MLPCopy', fullcopy='FullCopy'
)


def _cell(mean, std, n):
    return f'{mean:.2f} +- {std:.2f} ({n})' if n > 1 else f'{mean:.2f} (1)'


def sweep_axis(table):
    """'epochs' or 'lambda' when the summarised runs sweep that axis (epochs
    first), else None: a plain settings grid."""
    if len({entry[5] for entry in table}) > 1:
        return 'epochs'
    if len({entry[4] for entry in table if entry[3]}) > 1:
        return 'lambda'
    return None


def print_markdown(rows):
    """The summary as Markdown: top-1 mean +- std (seeds). A settings grid
    (one lambda, one schedule) is a matrix with a row per dataset, operator
    and distillation and a column per setting; a sweep is one line per
    configuration."""
    table = summarise(rows)
    if sweep_axis(table):
        print(
            '| dataset | operator | setting | distill | lambda | epochs | '
            'top-1 (%) (seeds) |'
        )
        print('| --- | --- | --- | --- | --- | --- | --- |')
        for data, op, setting, distill, lam, epochs, *stats in table:
            print(
                f'| {data} | {op} | {setting} | '
                f'{"w/" if distill else "w/o"} | {lam:g} | {epochs} | '
                f'{_cell(*stats)} |'
            )
        return
    settings = [s for s in SETTING_TITLES if any(e[2] == s for e in table)]
    cells = {entry[:4]: _cell(*entry[6:]) for entry in table}
    print(
        '| dataset | operator | distill | '
        + ' | '.join(SETTING_TITLES[s] for s in settings)
        + ' |'
    )
    print('| --- | --- | --- |' + ' --- |' * len(settings))
    lines = sorted({(e[0], e[1], e[3]) for e in table if e[2] != 'softmax'})
    for data, op, distill in lines:
        values = [cells.get((data, op, s, distill), '-') for s in settings]
        print(
            f'| {data} | {op} | {"w/" if distill else "w/o"} | '
            + ' | '.join(values)
            + ' |'
        )
    for data, op, setting, distill in cells:
        if setting == 'softmax':
            print(
                f'| {data} | softmax (fine-tuned reference) | w/o | '
                + cells[data, op, setting, distill]
                + ' |' * len(settings)
            )


def plot_results(rows, path):
    """The sweep plot when the rows vary epochs or lambda, else the Fig.-4
    bars."""
    axis = sweep_axis(summarise(rows))
    if axis:
        plot_sweep(rows, path, axis)
    else:
        plot(rows, path)


def plot_sweep(rows, path, axis):
    """Top-1 (mean +- std over seeds) against ``axis`` ('epochs' or
    'lambda'), one line per dataset, operator, setting and distillation."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    column = 5 if axis == 'epochs' else 4
    lines = defaultdict(list)
    for entry in summarise(rows):
        data, op, setting, distill = entry[:4]
        label = f'{data} {op} {setting}' + (' + distill' if distill else '')
        lines[label].append((entry[column], entry[6], entry[7]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in sorted(lines.items()):
        x, mean, std = zip(*sorted(points))
        ax.errorbar(x, mean, yerr=std, marker='o', capsize=3, label=label)
    if axis == 'lambda':
        ax.set_xscale('log')
    ax.set_xlabel('lambda (distillation weight)' if axis == 'lambda' else axis)
    ax.set_ylabel('top-1 (%)')
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot(rows, path):
    """Fig.-4-style bars: per operator and setting, the top-1 without
    distillation with the distillation gain stacked on top; the softmax
    reference as a dashed line. One panel per target dataset."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    table = summarise(rows)
    targets = sorted({r[0] for r in table})
    fig, axes = plt.subplots(
        1, len(targets), figsize=(7 * len(targets), 4), squeeze=False
    )
    for ax, target in zip(axes[0], targets):
        # Default lambda/epochs: the most common ones of this target.
        entries = [r for r in table if r[0] == target]
        softmax = [r[6] for r in entries if r[2] == 'softmax']
        operators = sorted({r[1] for r in entries if r[2] != 'softmax'})
        settings = [
            s
            for s in SETTINGS
            if s != 'softmax' and any(r[2] == s for r in entries)
        ]
        width = 0.8 / max(len(operators), 1)
        for i, op in enumerate(operators):
            base, gain, xs = [], [], []
            for j, setting in enumerate(settings):
                plain = [
                    r[6]
                    for r in entries
                    if r[1] == op and r[2] == setting and not r[3]
                ]
                dist = [
                    r[6]
                    for r in entries
                    if r[1] == op and r[2] == setting and r[3]
                ]
                if not plain and not dist:
                    continue
                low = plain[0] if plain else 0.0
                xs.append(j + i * width)
                base.append(low)
                gain.append(max(dist) - low if dist else 0.0)
            bars = ax.bar(xs, base, width, label=f'{op} w/o distill')
            ax.bar(
                xs,
                gain,
                width,
                bottom=base,
                alpha=0.45,
                color=bars.patches[0].get_facecolor() if bars else None,
                hatch='//',
                label=f'{op} w/ distill (hatched: gain)',
            )
        if softmax:
            ax.axhline(softmax[0], ls='--', color='k', label='softmax')
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(settings))])
        ax.set_xticklabels(settings)
        ax.set_ylabel('top-1 (%)')
        ax.set_title(target)
        values = [r[6] for r in entries]
        if values:
            ax.set_ylim(max(0, min(values) - 10), min(100, max(values) + 3))
        ax.legend(fontsize=7, loc='upper left', ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Run a grid of small-scale copy/distill experiments.'
    )
    parser.add_argument(
        '--operators', nargs='+', default=['gla'], choices=sorted(OPERATORS)
    )
    parser.add_argument(
        '--settings',
        nargs='+',
        default=['random', 'mlpcopy'],
        choices=[
            *SETTINGS,
            *(f'{s}+distill' for s in SETTINGS if s != 'softmax'),
        ],
        help="settings; 'NAME+distill' runs NAME with distillation only",
    )
    parser.add_argument(
        '--distill', choices=['off', 'on', 'both'], default='both'
    )
    parser.add_argument('--lambdas', nargs='+', type=float, default=[50.0])
    parser.add_argument('--epochs', nargs='+', type=int, default=[10])
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
    parser.add_argument(
        '--targets',
        nargs='+',
        default=['fashion-mnist-5k'],
        choices=list(TARGETS),
    )
    parser.add_argument(
        '--teacher',
        default=DEFAULT_TEACHER,
        help='softmax teacher checkpoint (trained once with '
        'the teacher config if the file does not exist)',
    )
    parser.add_argument(
        '--train-indices',
        type=int,
        default=None,
        help='train on only the first N target images (quick checks)',
    )
    parser.add_argument(
        '--test-indices',
        type=int,
        default=None,
        help='test on only the first N test images',
    )
    parser.add_argument(
        '--report',
        action='store_true',
        help='only summarise --out: Markdown table and plot, no runs',
    )
    parser.add_argument(
        '--teacher-only',
        action='store_true',
        help='train (or find) the teacher and stop',
    )
    parser.add_argument('--out', default='results/reproduce.csv')
    parser.add_argument('--work-root', default='work_dirs/reproduce')
    parser.add_argument(
        '--jobs',
        type=int,
        default=1,
        help='runs trained at once, each in its own worker process',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help='torch CPU threads per run (default: the CPU count divided '
        'by --jobs)',
    )
    return parser.parse_args(argv)


def train_and_test(run, teacher, work_root, train_indices, test_indices):
    """Build, train and test one grid run: (top-1 %, wall seconds)."""
    cfg = run_config(
        run['dataset'],
        run['operator'],
        run['setting'],
        bool(run['distill']),
        run['lambda'],
        run['epochs'],
        run['seed'],
        teacher,
        osp.join(work_root, run_name(run)),
    )
    limit_data(cfg, train_indices, test_indices)
    started = time.time()
    top1 = run_one(cfg)
    return top1, time.time() - started


def run_name(run):
    return '_'.join(f'{v}' for v in run.values())


def run_grid(todo, args, teacher):
    """Train and test every run of ``todo``, appending each result to the
    CSV as soon as it is known, with progress and the grid's ETA."""
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    started = time.time()

    def record(n, run, top1, wall):
        append_row(
            args.out,
            dict(run, top1=f'{top1:.2f}', wall_s=f'{wall:.1f}', device=device),
        )
        elapsed = time.time() - started
        eta = elapsed / (n + 1) * (len(todo) - n - 1)
        print(
            f'[{n + 1}/{len(todo)}] {run_name(run)}: top-1 {top1:.2f}% in '
            f'{wall:.0f} s; grid ETA {eta / 60:.1f} min',
            flush=True,
        )

    data = (args.train_indices, args.test_indices)
    if args.jobs == 1:
        for n, run in enumerate(todo):
            record(
                n, run, *train_and_test(run, teacher, args.work_root, *data)
            )
        return
    spawn = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(
        args.jobs,
        mp_context=spawn,
        initializer=torch.set_num_threads,
        initargs=(args.threads,),
    ) as pool:
        futures = {
            pool.submit(
                train_and_test, run, teacher, args.work_root, *data
            ): run
            for run in todo
        }
        for n, future in enumerate(as_completed(futures)):
            record(n, futures[future], *future.result())


def main(argv=None):
    args = parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f'--jobs must be at least 1, got {args.jobs}.')
    # Data roots in the configs are relative to the repository.
    args.out, args.work_root, args.teacher = (
        osp.abspath(p) for p in (args.out, args.work_root, args.teacher)
    )
    os.chdir(ROOT)
    if args.report:
        rows = read_rows(args.out)
        if not rows:
            raise SystemExit(f'No results in {args.out}.')
        print_markdown(rows)
        plot_results(rows, osp.splitext(args.out)[0] + '.png')
        return rows
    args.threads = args.threads or max(1, os.cpu_count() // args.jobs)
    torch.set_num_threads(args.threads)
    teacher = ensure_teacher(
        args.teacher, args.work_root, args.train_indices, args.test_indices
    )
    if args.teacher_only:
        return []
    done = {run_key(r) for r in read_rows(args.out)}
    todo = [run for run in grid(args) if run_key(run) not in done]
    print(
        f'{len(done)} runs already in {args.out}; {len(todo)} to run '
        f'({args.jobs} at a time, {args.threads} threads each).'
    )
    run_grid(todo, args, teacher)
    rows = read_rows(args.out)
    print_table(rows)
    figure = osp.splitext(args.out)[0] + '.png'
    plot_results(rows, figure)
    print(f'Results: {args.out}, plot: {figure}')
    return rows


if __name__ == '__main__':
    main()
