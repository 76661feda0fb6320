"""Initialise a linear student from a softmax checkpoint, offline.

Builds the model of CONFIG, runs mmengine's own ``init_weights`` (seeded as
the runner would), applies the init setting exactly as
``SoftmaxToLinearInitHook`` does in ``before_train``, prints the copy table
and saves the student as an ordinary mmpretrain classifier checkpoint
(``backbone.*``, ``head.*``). A distillation config whose
``model.teacher_checkpoint`` is unset takes CHECKPOINT as the teacher too.

Example:
    python tools/init_student.py \\
        configs/lvit/deit-s_gla_mlpcopy-distill_cifar10.py \\
        deit_small_patch16_224.pth --setting MLPCopy --out work_dirs/init.pth
"""

import argparse
import os
import os.path as osp

from mmlvit.apis import add_init_arguments, init_student, save_student
from mmlvit.transfer import COMPONENTS
from mmlvit.utils.cli import add_cfg_options
from mmlvit.utils.logs import read_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='config of the student (or distiller)')
    parser.add_argument('checkpoint', help='softmax checkpoint to copy from')
    add_init_arguments(parser)
    parser.add_argument(
        '--components',
        nargs='+',
        choices=COMPONENTS,
        help="copy exactly these components instead of the setting's list",
    )
    parser.add_argument(
        '--out',
        required=True,
        help='where to save the initialised student (.pth)',
    )
    add_cfg_options(parser)
    return parser.parse_args(argv)


def check_out(path):
    """Fail before any work when the student cannot be saved at ``path``.

    Creates the folder (as saving would) and opens the file for appending,
    removing it again if it did not exist.
    """
    existed = osp.lexists(path)
    try:
        if osp.dirname(path):
            os.makedirs(osp.dirname(path), exist_ok=True)
        with open(path, 'ab'):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        if isinstance(err, FileExistsError):  # makedirs met a file
            reason = f'{err.filename} is a file, not a folder'
        raise SystemExit(
            f'Cannot save the student to --out {path}: {reason}. '
            'Choose a file in a writable folder.'
        ) from err
    if not existed:
        os.remove(path)


def main(argv=None):
    args = parse_args(argv)
    check_out(args.out)
    cfg = read_config(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    # A distiller config takes the checkpoint once: it is also the teacher.
    student, report, seed = init_student(
        cfg,
        args.checkpoint,
        args.setting,
        args.components,
        args.format,
        args.seed,
    )
    print(report.table())
    meta = dict(
        setting=args.setting,
        components=report.policy.components,
        softmax_checkpoint=osp.basename(args.checkpoint),
        seed=seed,
        config=osp.basename(args.config),
    )
    save_student(student, args.out, meta)
    print(f'Saved the initialised student to {args.out}')


if __name__ == '__main__':
    main()
