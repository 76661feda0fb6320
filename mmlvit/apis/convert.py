"""One softmax ViT file -> a linear student and the config that trains it.

:func:`convert_to_student` reads a softmax checkpoint in any supported
layout and its architecture (:mod:`mmlvit.transfer.arch`), writes a
distillation config that inherits the project's DeiT transfer recipe
(``configs/_base_/lvit/deit-s_mlpcopy-distill_{dataset}.py``) at that
architecture, with the operator, the init setting, the teacher's file and
the student's initial weights filled in, and initialises the student from
that config as a training run would (:func:`.student.init_student`).
"""

import glob
import os
import os.path as osp
import re

from mmlvit.models.attentions import registered_operators
from mmlvit.transfer import (
    Setting,
    SoftmaxCheckpoint,
    ViTArch,
    get_setting,
    infer_vit_arch,
)
from mmlvit.utils.logs import read_config

from .student import init_student, save_student

_RECIPE = 'deit-s_mlpcopy-distill_{}.py'
# The recipes' input side: a DINOv2 table (518 px) is resampled to it.
RECIPE_IMG_SIZE = 224
# The recipe dataset of your own images (mmpretrain's CustomDataset).
IMAGE_FOLDER = 'folder'


def configs_root() -> str:
    """The project's configs: the source tree's, else the packaged copy."""
    package = osp.dirname(osp.dirname(osp.realpath(__file__)))
    for root in (
        osp.join(osp.dirname(package), 'configs'),
        osp.join(package, '.mim', 'configs'),
    ):
        if osp.isdir(osp.join(root, '_base_', 'lvit')):
            return root
    raise FileNotFoundError(
        f'No mmlvit configs next to {package} (configs/ or .mim/configs).'
    )


def recipe_datasets() -> list[str]:
    """Datasets of the DeiT transfer recipe (``cifar10``, ``stl10``, ...)."""
    pattern = osp.join(configs_root(), '_base_', 'lvit', _RECIPE.format('*'))
    prefix, suffix = _RECIPE.split('{}')
    return sorted(
        osp.basename(p)[len(prefix) : -len(suffix)] for p in glob.glob(pattern)
    )


def image_folder_classes(data_root: str) -> list[str]:
    """The classes of an image-folder dataset: the sub-folders of
    ``data_root/train``, which ``data_root/val`` holds too.

    Raises:
        ValueError: The folders are missing, hold fewer than two classes, or
            differ between train/ and val/ (the message gives the layout).
    """
    layout = (
        f'{data_root}/train/<class>/*.jpg and {data_root}/val/<class>/*.jpg '
        '(the same class folders)'
    )
    found = {}
    for split in ('train', 'val'):
        folder = osp.join(data_root, split)
        if not osp.isdir(folder):
            raise ValueError(
                f'--dataset {IMAGE_FOLDER} reads {folder}, which does not '
                f'exist: lay the images out as {layout}.'
            )
        found[split] = sorted(
            d for d in os.listdir(folder) if osp.isdir(osp.join(folder, d))
        )
    if len(found['train']) < 2:
        raise ValueError(
            f'{data_root}/train has {len(found["train"])} class folders; '
            f'a classifier needs two or more: {layout}.'
        )
    if found['train'] != found['val']:
        differ = sorted(set(found['train']) ^ set(found['val']))
        raise ValueError(
            f'{data_root}/train and {data_root}/val hold different class '
            f'folders ({", ".join(differ[:5])} in one only): {layout}.'
        )
    return found['train']


def dataset_classes(dataset: str, data_root: str | None) -> int | None:
    """The number of classes the written config must set: the image
    folder's (:func:`image_folder_classes`), None for a recipe dataset
    (its config has them).

    Raises:
        ValueError: ``'folder'`` without ``data_root``, or a wrong layout.
    """
    if dataset != IMAGE_FOLDER:
        return None
    if data_root is None:
        raise ValueError(
            f'--dataset {IMAGE_FOLDER} needs --data-root DIR, the folder '
            'holding train/<class>/ and val/<class>/.'
        )
    return len(image_folder_classes(data_root))


def _data_text(data_root, num_classes, input_norm) -> str:
    """Config lines pointing every loader at ``data_root``, setting the
    classes and the top-k metric they allow, and the family's input
    normalisation (``mean``, ``std``; empty when none is given)."""
    lines = []
    if data_root is not None:
        lines.append(f'data_root = {data_root!r}')
        for split in ('train', 'val', 'test'):
            lines.append(
                f'{split}_dataloader = dict(dataset=dict(data_root=data_root))'
            )
    preprocessor = dict(input_norm or {})
    if num_classes is not None:
        preprocessor['num_classes'] = num_classes
        # Top-5 accuracy needs five classes or more.
        topk = (1, 5) if num_classes >= 5 else (1,)
        lines.append(f"val_evaluator = dict(type='Accuracy', topk={topk})")
        lines.append('test_evaluator = val_evaluator')
    if preprocessor:
        lines.append(f'data_preprocessor = {_literal(preprocessor)}')
    return '\n'.join(lines) + '\n' if lines else ''


def resolve_operator(name: str) -> type:
    """The registered operator class named by its type or short name
    (``'gla'``, ``'GatedLinearAttention'``)."""
    operators = registered_operators()
    for type_name, cls in operators.items():
        if name in (type_name, cls.short_name):
            return cls
    names = sorted(cls.short_name for cls in operators.values())
    raise ValueError(
        f'Unknown operator {name!r}; choose from {", ".join(names)} (or '
        'their registry names).'
    )


def _path_in_config(path, config_dir):
    """``path`` relative to the config's folder when both lie in one tree
    below the configs' parent, else absolute."""
    path = osp.abspath(path)
    top = osp.dirname(configs_root())
    if osp.commonpath([path, top]) == top and (
        osp.commonpath([osp.abspath(config_dir), top]) == top
    ):
        return osp.relpath(path, config_dir)
    return path


def _literal(value, indent=0):
    """``value`` as config source: dicts as ``dict(key=value, ...)``, one
    key a line."""
    if isinstance(value, dict):
        pad = ' ' * (indent + 4)
        items = ',\n'.join(
            f'{pad}{key}={_literal(item, indent + 4)}'
            for key, item in value.items()
        )
        return f'dict(\n{items})'
    if isinstance(value, list):
        return '[' + ', '.join(_literal(v, indent) for v in value) + ']'
    return repr(value)


def student_config_text(
    arch: ViTArch,
    operator: type,
    setting: Setting,
    dataset: str,
    teacher: str,
    student: str,
    base: str,
    source: str,
    data_root: str | None = None,
    num_classes: int | None = None,
) -> str:
    """The text of the written config (see :func:`convert_to_student`)."""
    arch_value = arch.arch
    if isinstance(arch_value, dict):
        # The recipe names a zoo arch: replace it, do not merge into it.
        arch_value = dict(_delete_=True, **arch_value)
    shape = dict(
        arch=arch_value,
        img_size=arch.img_size,
        patch_size=arch.patch_size,
        in_channels=arch.in_channels,
    )
    teacher_head = dict(in_channels=arch.embed_dims)
    if arch.num_classes:
        teacher_head['num_classes'] = arch.num_classes
    student_head = dict(in_channels=arch.embed_dims)
    teacher_backbone = dict(shape)
    family = arch.backbone_options()
    if family:
        # The teacher: the project's backbone with softmax attention and
        # the family's parts computes the source model's function.
        shape.update(family)
        teacher_backbone = dict(
            shape,
            type='LinearVisionTransformer',
            attn_cfg=dict(type='SoftmaxAttention'),
        )
    if arch.head_type != 'VisionTransformerClsHead':
        teacher_head['type'] = student_head['type'] = arch.head_type
    model = dict(
        teacher_checkpoint=teacher,
        student=dict(
            backbone=dict(
                shape, attn_cfg=dict(_delete_=True, type=operator.__name__)
            ),
            head=student_head,
        ),
        # A file without a classifier (DINOv2, MAE, ...): the teacher is
        # its backbone; attention distillation needs no teacher logits.
        teacher=dict(
            backbone=teacher_backbone,
            head=teacher_head if arch.num_classes else None,
        ),
    )
    if arch.neck is not None:
        # SigLIP's pooling (MAP or GAP), the same in both; the recipe has
        # no neck (None) to merge into.
        for net in ('student', 'teacher'):
            model[net]['neck'] = dict(_delete_=True, **arch.neck)
    if num_classes is not None:
        model['student']['head']['num_classes'] = num_classes
    hooks = [dict(type='SoftmaxToLinearInitHook', setting=setting.name)]
    return (
        f'# A {operator.__name__} student of {source}:\n'
        f'# {arch.describe()};\n'
        f'# initialised with {setting.name} (load_from) and distilled from '
        f'that softmax\n# model on {dataset} with the DeiT transfer recipe. '
        'Written by tools/convert.py.\n'
        f'# Train: python tools/train.py THIS_FILE\n'
        f'_base_ = [{base!r}]\n\n'
        f'model = {_literal(model)}\n\n'
        '# The student starts from load_from: the hook then copies nothing '
        'again.\n'
        f'custom_hooks = {_literal(hooks)}\n'
        f'load_from = {student!r}\n'
    ) + _data_text(data_root, num_classes, arch.input_norm)


def convert_to_student(
    src: str,
    out_dir: str,
    operator: str = 'gla',
    setting: str = 'MLPCopy',
    dataset: str = 'cifar10',
    format: str = 'auto',
    num_heads: int | None = None,
    seed: int | None = None,
    data_root: str | None = None,
) -> dict:
    """Write a linear student of a softmax ViT and its training config.

    Args:
        src (str): Softmax checkpoint, any format of
            :func:`mmlvit.transfer.load_softmax_checkpoint`.
        out_dir (str): Folder for ``{stem}.py`` (the config) and
            ``{stem}_init.pth`` (the student, mmpretrain format).
        operator (str): Attention operator, short or registry name.
        setting (str): Init setting (``SETTINGS``).
        dataset (str): One of :func:`recipe_datasets`; ``'folder'``: the
            images under ``data_root`` (see :func:`image_folder_classes`).
        format (str): Layout of ``src``, or 'auto'.
        num_heads (int, optional): Heads, when the width is not a standard
            ViT's (see :func:`mmlvit.transfer.infer_vit_arch`).
        seed (int, optional): Seed of the student's fresh parameters.
        data_root (str, optional): Where the dataset lies (the recipe's
            ``data/<dataset>`` otherwise); required for ``'folder'``.

    Returns:
        dict: ``config``, ``student`` (paths), ``arch`` (ViTArch),
        ``report`` (CopyReport).
    """
    operator_cls = resolve_operator(operator)
    setting_rec = get_setting(setting)
    if dataset not in recipe_datasets():
        raise ValueError(
            f'Unknown dataset {dataset!r}; the recipe has '
            f'{", ".join(recipe_datasets())}.'
        )
    num_classes = dataset_classes(dataset, data_root)
    # Read once, used twice; at the recipe's size (DINOv2 tables only).
    source = SoftmaxCheckpoint(src, format, img_size=RECIPE_IMG_SIZE)
    arch = infer_vit_arch(source.state_dict, num_heads, name=str(src))
    arch_name = (
        arch.arch
        if isinstance(arch.arch, str)
        else (f'vit-c{arch.embed_dims}-l{arch.num_layers}')
    )
    stem = (
        f'{arch_name}-p{arch.patch_size}_{operator_cls.short_name}_'
        f'{setting_rec.short_name}-distill_{dataset}'
    )
    stem = re.sub(r'[^\w.-]', '_', stem)
    os.makedirs(out_dir, exist_ok=True)
    config_path = osp.join(out_dir, stem + '.py')
    student_path = osp.join(out_dir, stem + '_init.pth')
    base = osp.join(configs_root(), '_base_', 'lvit', _RECIPE.format(dataset))
    text = student_config_text(
        arch,
        operator_cls,
        setting_rec,
        dataset,
        teacher=osp.abspath(src),
        student=osp.abspath(student_path),
        base=_path_in_config(base, out_dir),
        source=osp.basename(str(src)),
        data_root=None if data_root is None else osp.abspath(data_root),
        num_classes=num_classes,
    )
    with open(config_path, 'w') as f:
        f.write(text)
    try:
        cfg = read_config(config_path)
        student, report, seed = init_student(
            cfg, source, setting_rec.name, seed=seed
        )
    except BaseException:
        os.remove(config_path)
        raise
    meta = dict(
        setting=setting_rec.name,
        components=report.policy.components,
        softmax_checkpoint=osp.basename(str(src)),
        seed=seed,
        config=osp.basename(config_path),
    )
    save_student(student, student_path, meta)
    return dict(
        config=config_path, student=student_path, arch=arch, report=report
    )
