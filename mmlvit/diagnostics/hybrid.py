"""Hybrid students: keep softmax attention in the blocks that convert worst.

:func:`measure_blocks` distils a student from its teacher for a few
iterations (:func:`warm_up`, a real Runner run of the distillation config)
and measures every block's conversion error (:func:`diagnose_conversion`)
on training batches (never the evaluation split, which would leak into the
choice); :mod:`.kl_selection` chooses blocks on the same warm-up by the
divergence of the logits instead.
:func:`write_hybrid_config` writes a config that inherits the distillation
config and replaces the student's ``attn_cfg`` by a per-block list with
``SoftmaxAttention`` in the chosen blocks; its init hook copies those
blocks' attention weights from the teacher (``copy_softmax_attention``).
"""

import copy
import os
import os.path as osp

from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.runner import Runner

from .conversion import diagnose_conversion

SOFTMAX = dict(type='SoftmaxAttention')
INIT_HOOK = 'SoftmaxToLinearInitHook'
DISTILLER = 'AttentionDistiller'


def hybrid_attn_cfg(attn_cfg, depth, softmax_blocks):
    """The per-block ``attn_cfg`` list of a hybrid.

    Args:
        attn_cfg (dict | list[dict]): The student's operator(s).
        depth (int): Number of blocks.
        softmax_blocks (Sequence[int]): Blocks that keep softmax attention.

    Returns:
        list[dict]: One operator config per block.
    """
    per_block = (
        [copy.deepcopy(attn_cfg) for _ in range(depth)]
        if isinstance(attn_cfg, dict)
        else [copy.deepcopy(c) for c in attn_cfg]
    )
    if len(per_block) != depth:
        raise ValueError(
            f'attn_cfg lists {len(per_block)} operators for {depth} blocks.'
        )
    wrong = [b for b in softmax_blocks if not 0 <= b < depth]
    if wrong:
        raise ValueError(
            f'Blocks {wrong} do not exist: the student has {depth} blocks '
            f'(0..{depth - 1}).'
        )
    for block in softmax_blocks:
        per_block[block] = dict(SOFTMAX)
    return per_block


def _plain(value):
    """ConfigDicts -> dicts, recursively (for writing config text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def config_text(value, indent=0):
    """``value`` (dicts, lists, literals) as config-file Python: dicts with
    name keys as ``dict(k=v)``, one item per line when long."""
    pad = '    ' * (indent + 1)
    if isinstance(value, dict):
        if all(isinstance(k, str) and k.isidentifier() for k in value):
            items = [
                f'{k}={config_text(v, indent + 1)}' for k, v in value.items()
            ]
            opening, closing = 'dict(', ')'
        else:
            items = [
                f'{k!r}: {config_text(v, indent + 1)}'
                for k, v in value.items()
            ]
            opening, closing = '{', '}'
    elif isinstance(value, (list, tuple)):
        items = [config_text(v, indent + 1) for v in value]
        opening, closing = '[', ']'
    else:
        return repr(value)
    flat = opening + ', '.join(items) + closing
    if len(flat) + len(pad) <= 76 and '\n' not in flat:
        return flat
    inner = ',\n'.join(pad + item for item in items)
    return f'{opening}\n{inner},\n{pad[4:]}{closing}'


def hybrid_overrides(cfg, softmax_blocks, setting='MLPCopy'):
    """The entries a hybrid config changes in the distillation config
    ``cfg``: the student's ``attn_cfg`` list and the init hook (which also
    copies the softmax blocks' attention)."""
    if cfg.model.get('type') != DISTILLER:
        raise ValueError(
            'A hybrid is chosen from a distillation config (model type '
            f'{DISTILLER}), not {cfg.model.get("type")!r}.'
        )
    backbone = cfg.model.student.backbone
    if (
        not isinstance(backbone.arch, dict)
        or 'num_layers' not in backbone.arch
    ):
        raise ValueError(
            'The student backbone must give arch as a dict with num_layers.'
        )
    depth = backbone.arch['num_layers']
    hooks = [_plain(h) for h in cfg.get('custom_hooks') or []]
    init = [h for h in hooks if h['type'] == INIT_HOOK]
    if not init:
        hooks.append(dict(type=INIT_HOOK, setting=setting))
        init = hooks[-1:]
    for hook in init:
        hook['copy_softmax_attention'] = True
    return dict(
        attn_cfg=hybrid_attn_cfg(
            _plain(backbone.attn_cfg), depth, softmax_blocks
        ),
        custom_hooks=hooks,
    )


def make_hybrid(cfg, softmax_blocks) -> None:
    """Turn the distillation config ``cfg`` into the hybrid whose
    ``softmax_blocks`` keep softmax attention, in place
    (:func:`hybrid_overrides`)."""
    overrides = hybrid_overrides(cfg, softmax_blocks)
    cfg.model.student.backbone.attn_cfg = overrides['attn_cfg']
    cfg.custom_hooks = overrides['custom_hooks']


def warmup_config(cfg, iters, work_dir):
    """``cfg`` trained for ``iters`` iterations at its base learning rate,
    without evaluation or checkpoints."""
    cfg = copy.deepcopy(cfg)
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=iters)
    cfg.param_scheduler = None
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.test_cfg = cfg.test_dataloader = cfg.test_evaluator = None
    cfg.default_hooks.checkpoint = None
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=10)
    cfg.work_dir = work_dir
    cfg.train_dataloader.persistent_workers = False
    cfg.train_dataloader.setdefault('collate_fn', dict(type='default_collate'))
    return cfg


def warm_up(cfg, iters, work_dir, batches=4):
    """Distil for ``iters`` iterations (a real Runner run of ``cfg``).

    Args:
        cfg (Config): A distillation config (teacher checkpoint set).
        iters (int): Warm-up iterations (at least 1).
        work_dir (str): Log folder of the warm-up run.
        batches (int): Training batches to return.

    Returns:
        tuple: The trained distiller and ``batches`` preprocessed training
        batches (images), never the evaluation split.
    """
    if iters < 1:
        raise ValueError(
            f'The warm-up needs at least 1 iteration, not {iters}.'
        )
    runner = Runner.from_cfg(warmup_config(cfg, iters, work_dir))
    runner.train()
    distiller = runner.model
    MMLogger._instance_dict.clear()
    images = []
    for data in runner.train_dataloader:
        if len(images) == batches:
            break
        images.append(distiller.data_preprocessor(data, False)['inputs'])
    return distiller, images


def measure_blocks(cfg, iters, work_dir, batches=4):
    """Distil for ``iters`` iterations (:func:`warm_up`), then diagnose
    every block on ``batches`` training batches.

    Returns:
        ConversionDiagnosis
    """
    distiller, images = warm_up(cfg, iters, work_dir, batches)
    return diagnose_conversion(distiller.teacher, distiller.student, images)


def write_hybrid_config(path, base_config, cfg, softmax_blocks, selection):
    """Write a hybrid config that inherits ``base_config``.

    Args:
        path (str): The new config file.
        base_config (str): The distillation config it inherits.
        cfg (Config): ``base_config`` loaded (with any overrides the run
            used).
        softmax_blocks (Sequence[int]): Blocks that keep softmax attention.
        selection (dict): How the blocks were chosen; recorded in the
            config as ``hybrid_selection``.
    """
    overrides = hybrid_overrides(cfg, softmax_blocks)
    base = osp.abspath(base_config)
    if osp.commonpath([base, osp.abspath(path)]) == osp.commonpath(
        [base, os.getcwd()]
    ):  # both in the project: a relative path keeps the config movable
        base = osp.relpath(base, osp.dirname(osp.abspath(path)))
    how = selection.get('method', 'given')
    student = dict(backbone=dict(attn_cfg=overrides['attn_cfg']))
    lines = [
        f'# Hybrid student: blocks {list(softmax_blocks)} keep softmax '
        'attention (weights',
        '# copied from the teacher), the others keep the operator of',
        f'# {osp.basename(base_config)}. Blocks chosen: {how} '
        '(hybrid_selection).',
        '# Written by tools/analysis/choose_hybrid.py.',
        f'_base_ = [{base!r}]',
        '',
        'model = '
        + config_text(
            dict(
                teacher_checkpoint=cfg.model.teacher_checkpoint,
                student=student,
            )
        ),
        'custom_hooks = ' + config_text(overrides['custom_hooks']),
        'hybrid_selection = ' + config_text(_plain(selection)),
        '',
    ]
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'w') as file:
        file.write('\n'.join(lines))
    Config.fromfile(path)  # the written file must parse
