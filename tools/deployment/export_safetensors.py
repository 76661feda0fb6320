"""Export a trained classifier as safetensors + JSON, rebuildable without
config files.

Writes OUT.safetensors (the classifier's weights under their mmpretrain
names) and OUT.json (the model's config dict: types and arguments), then
rebuilds the model from that pair alone and checks that it gives the same
logits as the checkpoint on a random batch. Rebuild it elsewhere with::

    from mmlvit.deployment import load_portable
    model = load_portable('OUT.json')  # raw pixels -> class scores

Example:
    python tools/deployment/export_safetensors.py \\
        configs/lvit/deit-s_gla_mlpcopy-distill_cifar10.py \\
        work_dirs/deit-s_gla/epoch_300.pth --out work_dirs/deploy/deit-s_gla
"""

import argparse

import torch

from mmlvit.deployment import export_portable, load_classifier, load_portable


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='classifier or distiller config')
    parser.add_argument('checkpoint', help='trained checkpoint')
    parser.add_argument(
        '--out', required=True, help='path of both files, without suffix'
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    weights, config = export_portable(args.config, args.checkpoint, args.out)
    model, _ = load_classifier(args.config, args.checkpoint)
    backbone = model.backbone
    images = torch.randn(
        2,
        backbone.patch_embed.projection.in_channels,
        *backbone.patch_embed.init_input_size,
    )
    with torch.no_grad():
        expected = model(images, mode='tensor')
        rebuilt = load_portable(config).classifier(images, mode='tensor')
    diff = (rebuilt - expected).abs().max().item()
    print(f'Wrote {weights} and {config}')
    print(f'Rebuilt from them: max abs difference of the logits {diff:.3g}')


if __name__ == '__main__':
    main()
