"""Turn a softmax ViT checkpoint into a linear student ready to train.

Reads SOFTMAX_CKPT in any supported layout (mmpretrain, timm .pth or
.safetensors, official DeiT, DeiT III, distilled DeiT, CLIP in timm's or
OpenAI's layout, SigLIP, DINOv2 in timm's layout, EVA-02, MAE, DINO, MoCo
v3, iBOT), reads the architecture off its weights (width, depth, MLP width,
patch size, image size, classes; heads by the standard ViT zoo unless
--num-heads; a DINOv2 position table is resampled to the recipe's 224 px),
and writes to --out:

- ``{stem}.py``: a distillation config inheriting the DeiT transfer recipe
  of configs/_base_/lvit/ at that architecture, with the operator, the
  teacher's file and the student's initial weights filled in;
- ``{stem}_init.pth``: the student initialised with --setting, an
  mmpretrain classifier checkpoint.

It prints the copy report and the command that trains the student.

Example:
    python tools/convert.py deit_small_patch16_224.safetensors \\
        --operator gla --setting MLPCopy --out work_dirs/deit-s_gla
    python tools/train.py \\
        work_dirs/deit-s_gla/deit-small-p16_gla_mlpcopy-distill_cifar10.py
"""

import argparse
import os.path as osp
import sys

from mmlvit.apis import (
    add_init_arguments,
    convert_to_student,
    dataset_classes,
    recipe_datasets,
    resolve_operator,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('checkpoint', help='softmax checkpoint to convert')
    parser.add_argument(
        '--operator',
        default='gla',
        help='attention operator of the student, short or registry name '
        '(default: gla)',
    )
    add_init_arguments(parser)
    parser.add_argument(
        '--arch',
        default='auto',
        choices=['auto'],
        help='architecture: read off the weights (the only choice; '
        '--num-heads for a non-standard width)',
    )
    parser.add_argument(
        '--num-heads',
        type=int,
        help='heads (default: the standard ViT of that width)',
    )
    parser.add_argument(
        '--dataset',
        default='cifar10',
        choices=recipe_datasets(),
        help="dataset of the training recipe (default: cifar10); 'folder': "
        'your images under --data-root, in DIR/train/<class>/ and '
        'DIR/val/<class>/',
    )
    parser.add_argument(
        '--data-root',
        help="where the dataset lies (default: the recipe's data/<dataset>; "
        'required for --dataset folder)',
    )
    parser.add_argument(
        '--out', required=True, help='folder for the config and the student'
    )
    args = parser.parse_args(argv)
    try:
        resolve_operator(args.operator)
        dataset_classes(args.dataset, args.data_root)
    except ValueError as err:
        parser.error(str(err))
    return args


def main(argv=None):
    args = parse_args(argv)
    result = convert_to_student(
        args.checkpoint,
        args.out,
        operator=args.operator,
        setting=args.setting,
        dataset=args.dataset,
        format=args.format,
        num_heads=args.num_heads,
        seed=args.seed,
        data_root=args.data_root,
    )
    print(f'Softmax model: {result["arch"].describe()}')
    print(result['report'].table())
    print(f'Student: {result["student"]}')
    print(f'Config:  {result["config"]}')
    train = osp.join(osp.dirname(osp.abspath(__file__)), 'train.py')
    config = osp.abspath(result['config'])
    print(f'Train:   {sys.executable} {train} {config}')


if __name__ == '__main__':
    main()
