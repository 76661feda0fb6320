"""Convert a softmax ViT checkpoint to an mmpretrain classifier checkpoint.

Reads any layout of ``mmlvit.transfer.load_softmax_checkpoint`` (timm/DeiT
.pth or .safetensors, official DeiT, MAE, DINO, MoCo v3, iBOT, mmpretrain)
and writes ``{'state_dict': ..., 'meta': ...}`` (.pth) or a flat
.safetensors file, loadable into ``ImageClassifier(VisionTransformer)``.

Example:
    python tools/convert/timm_to_mmpretrain.py \\
        deit_tiny_patch16_224-a1311bcf.pth deit-t_mmpretrain.pth
"""

import argparse
import os
import os.path as osp

import torch

from mmlvit.transfer import FORMATS, load_softmax_checkpoint


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='softmax checkpoint to read')
    parser.add_argument('dst', help='output file (.pth or .safetensors)')
    parser.add_argument(
        '--format',
        default='auto',
        choices=FORMATS,
        help='layout of src (default: detect it)',
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    state_dict = load_softmax_checkpoint(args.src, args.format)
    if osp.dirname(args.dst):
        os.makedirs(osp.dirname(args.dst), exist_ok=True)
    if args.dst.endswith('.safetensors'):
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state_dict.items()}, args.dst)
    else:
        torch.save(
            dict(
                state_dict=state_dict,
                meta=dict(converted_from=osp.basename(args.src)),
            ),
            args.dst,
        )
    print(f'Wrote {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    main()
