"""Initialise a linear student from a softmax checkpoint, offline.

Builds the model of CONFIG, runs mmengine's own ``init_weights`` (seeded as
the runner would), applies the init setting exactly as
``SoftmaxToLinearInitHook`` does in ``before_train``, prints the copy table
and saves the student as an ordinary mmpretrain classifier checkpoint
(``backbone.*``, ``head.*``).

Example:
    python tools/init_student.py configs/lvit/deit-t_relu_mlpcopy.py \\
        deit_tiny_patch16_224.pth --setting MLPCopy --out work_dirs/init.pth
"""

import argparse
import os
import os.path as osp

import torch
from mmengine.config import DictAction
from mmengine.registry import init_default_scope
from mmengine.runner import set_random_seed
from mmpretrain.registry import MODELS

from mmlvit.engine.hooks.init_hook import SoftmaxToLinearInitHook, find_student
from mmlvit.engine.logs import INIT_DUMP, drop_messages, read_config
from mmlvit.transfer import COMPONENTS, FORMATS, setting_names


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='config of the student (or distiller)')
    parser.add_argument('checkpoint', help='softmax checkpoint to copy from')
    parser.add_argument(
        '--setting',
        default='MLPCopy',
        choices=setting_names(),
        help='init setting (default: MLPCopy)',
    )
    parser.add_argument(
        '--components',
        nargs='+',
        choices=COMPONENTS,
        help="copy exactly these components instead of the setting's list",
    )
    parser.add_argument(
        '--format',
        default='auto',
        choices=FORMATS,
        help='layout of the checkpoint (default: detect it)',
    )
    parser.add_argument(
        '--out',
        required=True,
        help='where to save the initialised student (.pth)',
    )
    parser.add_argument(
        '--seed',
        type=int,
        help="seed of the fresh init (default: the config's "
        'randomness.seed, else 0)',
    )
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config entries, e.g. key=value',
    )
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
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    seed = args.seed
    if seed is None:
        seed = (cfg.get('randomness') or {}).get('seed') or 0
    set_random_seed(seed)
    model = MODELS.build(cfg.model)
    # Outside a runner mmengine prints each tensor's init (about 1,400
    # lines for a ViT): the copy table below says what matters.
    with drop_messages(INIT_DUMP):
        model.init_weights()
    hook = SoftmaxToLinearInitHook(
        args.checkpoint, args.setting, args.components, args.format
    )
    report = hook.initialise(model)
    print(report.table())
    meta = dict(
        setting=args.setting,
        components=report.policy.components,
        softmax_checkpoint=osp.basename(args.checkpoint),
        seed=seed,
        config=osp.basename(args.config),
    )
    torch.save(
        dict(state_dict=find_student(model).state_dict(), meta=meta), args.out
    )
    print(f'Saved the initialised student to {args.out}')


if __name__ == '__main__':
    main()
