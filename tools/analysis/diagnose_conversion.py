"""Which blocks of a softmax-to-linear conversion are hard? Per-block error
of a student against its softmax teacher on a few validation batches.

Builds the teacher and the student of CONFIG (a distiller config, or a
plain student config with --teacher-config), loads the teacher checkpoint,
gives the student a checkpoint (--student-checkpoint: a student saved by
training) or the init setting (--setting, as SoftmaxToLinearInitHook does),
runs both on the first --batches batches of the config's validation data and
prints, per block, the relative error of the attention-module output (in
the student's own forward and, "local", fed the teacher's input), the cosine
similarity of the block outputs and, for map-capable operators, the
total-variation distance of the attention maps; then the same for the final
features. Writes the table as CSV (diagnosis.csv), the final-feature
figures as JSON (final.json) and a per-block profile as PNG (diagnosis.png)
(mmlvit.diagnostics.conversion says what each number is).

Examples:
    python tools/analysis/diagnose_conversion.py \\
        configs/fashion_mnist/vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py\\
        checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth --setting MLPCopy
    python tools/analysis/diagnose_conversion.py CONFIG TEACHER.pth \\
        --student-checkpoint work_dirs/run/epoch_10.pth --out-dir diag/
"""

import argparse
import csv
import json
import os
import os.path as osp
import sys

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner, set_random_seed
from mmengine.utils import ProgressBar
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401  (registers the modules, safe loading)
from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.diagnostics import BLOCK_METRICS, diagnose_conversion
from mmlvit.models.distillers.attention_distiller import load_teacher_weights
from mmlvit.transfer import initialise, setting_names
from mmlvit.utils.cli import add_cfg_options

DISTILLER = 'AttentionDistiller'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        'config', help='student config: a distiller or a plain classifier'
    )
    parser.add_argument('teacher', help='softmax teacher checkpoint')
    parser.add_argument(
        '--teacher-config',
        help='config of the teacher classifier (needed when CONFIG is not a '
        'distiller config)',
    )
    parser.add_argument(
        '--student-checkpoint',
        help='trained student weights (a checkpoint saved by training)',
    )
    parser.add_argument(
        '--setting',
        choices=setting_names(),
        help='init setting of the student without --student-checkpoint '
        "(default: the config's SoftmaxToLinearInitHook setting, else "
        'Random)',
    )
    parser.add_argument(
        '--batches', type=int, default=4, help='validation batches (4)'
    )
    parser.add_argument(
        '--batch-size', type=int, help="override the config's batch size"
    )
    parser.add_argument(
        '--no-maps',
        action='store_true',
        help='skip the attention-map comparison (it needs B*h*N^2 memory)',
    )
    parser.add_argument(
        '--out-dir',
        default='work_dirs/diagnosis',
        help='where diagnosis.csv and diagnosis.png go',
    )
    parser.add_argument('--seed', type=int, default=0)
    add_cfg_options(parser)
    return parser.parse_args(argv)


def config_setting(cfg):
    """The setting of the config's SoftmaxToLinearInitHook, or None."""
    for hook in cfg.get('custom_hooks') or []:
        if hook.get('type') == 'SoftmaxToLinearInitHook':
            return hook.get('setting', 'MLPCopy')
    return None


def build_models(cfg, args):
    """(teacher, student) classifiers of the config, teacher weights
    loaded, the student as initialised by mmengine (init_weights)."""
    preprocessor = cfg.get('data_preprocessor')
    model_cfg = cfg.model
    if model_cfg.type == DISTILLER:
        model_cfg.teacher_checkpoint = args.teacher
        model_cfg.setdefault('data_preprocessor', preprocessor)
        model = MODELS.build(model_cfg)
        model.init_weights()
        return model.teacher, model.student
    if args.teacher_config is None:
        raise SystemExit(
            f'{args.config} is not a distiller config: give the softmax '
            "teacher's classifier config with --teacher-config."
        )
    teacher_cfg = Config.fromfile(args.teacher_config).model
    teacher_cfg.setdefault('data_preprocessor', preprocessor)
    model_cfg.setdefault('data_preprocessor', preprocessor)
    teacher = MODELS.build(teacher_cfg)
    load_teacher_weights(teacher, args.teacher)
    student = MODELS.build(model_cfg)
    student.init_weights()
    return teacher, student


def load_student(student, path):
    """Load trained student weights; every student parameter must come from
    the file."""
    state = load_checkpoint_file(path)
    state = state.get('state_dict', state)
    state = {k.removeprefix('student.'): v for k, v in state.items()}
    own = student.state_dict()
    wrong = [k for k in own if k in state and state[k].shape != own[k].shape]
    missing = [k for k in own if k not in state]
    if wrong or missing:
        raise CheckpointError(
            f'{path} does not fit the student of the config: '
            + (
                f'{len(missing)} missing (e.g. {missing[:3]}) '
                if missing
                else ''
            )
            + (
                f'{len(wrong)} of another shape (e.g. {wrong[:3]})'
                if wrong
                else ''
            )
            + '. Give the checkpoint that training of this config saved.'
        )
    student.load_state_dict({k: state[k] for k in own})


def validation_batches(cfg, student, args):
    """The first ``args.batches`` preprocessed batches (B, C, H, W)."""
    loader_cfg = cfg.get('val_dataloader') or cfg.get('test_dataloader')
    if loader_cfg is None:
        raise SystemExit(f'{args.config} has no val_dataloader to measure on.')
    loader_cfg.setdefault('collate_fn', dict(type='default_collate'))
    loader_cfg.persistent_workers = False
    if args.batch_size:
        loader_cfg.batch_size = args.batch_size
    loader = Runner.build_dataloader(loader_cfg)
    count = min(args.batches, len(loader))
    progress = ProgressBar(count)
    for i, data in enumerate(loader):
        if i == count:
            break
        yield student.data_preprocessor(data, False)['inputs']
        progress.update()
    sys.stdout.write('\n')


def format_table(diagnosis):
    header = ['block', 'operator', *BLOCK_METRICS]
    rows = [
        [str(row['block']), row['operator']]
        + [f'{row[m]:.4f}' for m in BLOCK_METRICS]
        for row in diagnosis.blocks
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)
    ]
    lines = ['  '.join(h.rjust(w) for h, w in zip(header, widths))]
    lines += ['  '.join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    final = diagnosis.final
    lines.append(
        f'final features: rel. error {final["feature_rel_err"]:.4f}, cosine '
        f'{final["feature_cos"]:.4f}; top-1 agreement with the teacher '
        f'{100 * final["top1_agreement"]:.2f} % ({final["images"]} images)'
    )
    return '\n'.join(lines)


def write_results(diagnosis, csv_path, json_path):
    """The per-block table as CSV, the final-feature figures as JSON."""
    with open(csv_path, 'w', newline='') as file:
        writer = csv.DictWriter(file, ['block', 'operator', *BLOCK_METRICS])
        writer.writeheader()
        writer.writerows(diagnosis.blocks)
    with open(json_path, 'w') as file:
        json.dump(diagnosis.final, file, indent=2)


def plot_profile(diagnosis, path, title):
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    blocks = [row['block'] for row in diagnosis.blocks]
    fig, err_ax = plt.subplots(figsize=(max(6, 0.5 * len(blocks) + 3), 4))
    width = 0.4
    err_ax.bar(
        [b - width / 2 for b in blocks],
        [row['attn_rel_err'] for row in diagnosis.blocks],
        width,
        label='attention output, own stream',
    )
    err_ax.bar(
        [b + width / 2 for b in blocks],
        [row['attn_rel_err_local'] for row in diagnosis.blocks],
        width,
        label="attention output, teacher's input",
    )
    err_ax.set_xlabel('block')
    err_ax.set_ylabel('relative error ||s - t|| / ||t||')
    err_ax.set_xticks(blocks)
    cos_ax = err_ax.twinx()
    cos_ax.plot(
        blocks,
        [row['block_cos'] for row in diagnosis.blocks],
        'k.-',
        label='block output cosine',
    )
    cos_ax.set_ylabel('cosine similarity')
    cos_ax.set_ylim(
        min(0.0, *[r['block_cos'] for r in diagnosis.blocks]), 1.02
    )
    handles = err_ax.get_legend_handles_labels()
    more = cos_ax.get_legend_handles_labels()
    err_ax.legend(
        handles[0] + more[0],
        handles[1] + more[1],
        loc='upper center',
        bbox_to_anchor=(0.5, -0.18),
        ncol=3,
        fontsize='small',
    )
    err_ax.set_title(title, fontsize='small')
    fig.savefig(path, dpi=120, bbox_inches='tight')
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    set_random_seed(args.seed)
    teacher, student = build_models(cfg, args)
    if args.student_checkpoint:
        load_student(student, args.student_checkpoint)
        source = f'student {osp.basename(args.student_checkpoint)}'
    else:
        setting = args.setting or config_setting(cfg) or 'Random'
        report = initialise(student, args.teacher, setting)
        print(report.table())
        source = f'student initialised with {setting}'
    with torch.no_grad():
        diagnosis = diagnose_conversion(
            teacher,
            student,
            validation_batches(cfg, student, args),
            maps=not args.no_maps,
        )
    print(format_table(diagnosis))
    os.makedirs(args.out_dir, exist_ok=True)
    csv_path = osp.join(args.out_dir, 'diagnosis.csv')
    json_path = osp.join(args.out_dir, 'final.json')
    png_path = osp.join(args.out_dir, 'diagnosis.png')
    write_results(diagnosis, csv_path, json_path)
    operators = '/'.join(
        dict.fromkeys(r['operator'] for r in diagnosis.blocks)
    )
    plot_profile(
        diagnosis,
        png_path,
        f'{operators} student of {osp.basename(args.config)}\n{source}; '
        f'teacher {osp.basename(args.teacher)}',
    )
    print(f'Wrote {csv_path}, {json_path} and {png_path}.')
    return diagnosis


if __name__ == '__main__':
    main()
