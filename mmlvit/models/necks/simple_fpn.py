"""SimpleFPN: the simple feature pyramid of ViTDet (Li et al. 2022,
arXiv:2203.16527) on one plain-ViT feature map."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmengine.model import BaseModule
from mmpretrain.registry import MODELS

SCALE_FACTORS = (4.0, 2.0, 1.0, 0.5)


@MODELS.register_module()
class SimpleFPN(BaseModule):
    """Multi-scale maps from the last map of a plain (single-scale) ViT.

    Each scale factor gets its own branch on the same input map of stride
    s (16 for a ViT with 16 px patches):

    - 4: two 2x2 stride-2 transposed convs (C -> C/2 -> C/4) with a norm
      and an activation between them (stride s/4);
    - 2: one 2x2 stride-2 transposed conv (C -> C/2; stride s/2);
    - 1: the map itself (stride s);
    - 0.5: 2x2 stride-2 max pooling (stride 2s);

    then a 1x1 conv + norm and a 3x3 conv + norm to ``out_channels``. Levels
    beyond the branches (``num_outs`` > number of scale factors, e.g. the
    stride-64 level of Mask R-CNN's RPN) are stride-2 subsamplings (1x1 max
    pooling) of the level before, as in mmdet's ``FPN``.

    Built in mmpretrain's registry scope whatever the caller's, so the
    default norm ``LN2d`` (mmpretrain's channel LayerNorm) resolves in
    MMDetection and MMSegmentation configs (``type='mmpretrain.SimpleFPN'``);
    mmcv's norms (``GN``, ``SyncBN``, ...) resolve there too, and a type
    registered only by another package takes its prefix (``'mmdet.X'``).

    Args:
        in_channels (int | Sequence[int]): Channels C of the input map (a
            sequence, e.g. one per backbone output, gives the last one's).
        out_channels (int): Channels of every output.
        num_outs (int, optional): Number of outputs, at least
            ``len(scale_factors)``. Defaults to None: one per scale factor.
        scale_factors (Sequence[float]): Branches, from the finest, each one
            of 4, 2, 1, 0.5. Defaults to (4, 2, 1, 0.5).
        norm_cfg (dict): Norm after the first transposed conv of scale 4 and
            in every ConvModule. Defaults to ``dict(type='LN2d', eps=1e-6)``.
        act_cfg (dict): Activation between the two transposed convs of
            scale 4. Defaults to GELU.
        init_cfg (dict, optional): mmengine init config.

    Shapes:
        inputs: a tuple of backbone maps; the last, (B, C, h, w), is used.
        outputs: a tuple of ``num_outs`` maps (B, out_channels, h_i, w_i),
        finest first: h_i = h * f_i for the scale factors f_i (for 0.5:
        floor(h / 2)), then ceil(h_{i-1} / 2) for each extra level.

    Example:
        >>> neck = SimpleFPN(in_channels=768, out_channels=256, num_outs=5)
        >>> [tuple(y.shape) for y in neck((torch.rand(1, 768, 32, 48),))]
        [(1, 256, 128, 192), (1, 256, 64, 96), (1, 256, 32, 48),
         (1, 256, 16, 24), (1, 256, 8, 12)]
    """

    def __init__(
        self,
        in_channels,
        out_channels,
        num_outs=None,
        scale_factors=SCALE_FACTORS,
        norm_cfg=None,
        act_cfg=None,
        init_cfg=None,
    ):
        super().__init__(init_cfg=init_cfg)
        if not isinstance(in_channels, int):
            in_channels = list(in_channels)[-1]
        scale_factors = tuple(float(f) for f in scale_factors)
        unknown = [f for f in scale_factors if f not in SCALE_FACTORS]
        if unknown or not scale_factors:
            raise ValueError(
                f'SimpleFPN scale_factors must be taken from {SCALE_FACTORS}, '
                f'got {scale_factors}.'
            )
        if num_outs is None:
            num_outs = len(scale_factors)
        if num_outs < len(scale_factors):
            raise ValueError(
                f'SimpleFPN num_outs={num_outs} is smaller than the '
                f'{len(scale_factors)} scale factors {scale_factors}.'
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.num_outs = num_outs
        self.scale_factors = scale_factors
        norm_cfg = norm_cfg or dict(type='LN2d', eps=1e-6)
        act_cfg = act_cfg or dict(type='GELU')
        self.branches = nn.ModuleList()
        self.lateral_convs = nn.ModuleList()
        self.output_convs = nn.ModuleList()
        # Norm and activation types resolve in mmpretrain's registry (LN2d).
        with MODELS.switch_scope_and_registry('mmpretrain'):
            for factor in scale_factors:
                branch, channels = _rescale_branch(
                    factor, in_channels, norm_cfg, act_cfg
                )
                self.branches.append(branch)
                self.lateral_convs.append(
                    ConvModule(
                        channels,
                        out_channels,
                        1,
                        norm_cfg=norm_cfg,
                        act_cfg=None,
                    )
                )
                self.output_convs.append(
                    ConvModule(
                        out_channels,
                        out_channels,
                        3,
                        padding=1,
                        norm_cfg=norm_cfg,
                        act_cfg=None,
                    )
                )

    def forward(self, inputs):
        """Tuple of backbone maps (the last, (B, C, h, w), is used; a bare
        map also works) -> tuple of ``num_outs`` maps
        (B, out_channels, h_i, w_i), finest first."""
        x = inputs if isinstance(inputs, torch.Tensor) else inputs[-1]
        outs = [
            output_conv(lateral_conv(branch(x)))
            for branch, lateral_conv, output_conv in zip(
                self.branches, self.lateral_convs, self.output_convs
            )
        ]
        while len(outs) < self.num_outs:
            outs.append(F.max_pool2d(outs[-1], 1, stride=2))
        return tuple(outs)


def _rescale_branch(factor, channels, norm_cfg, act_cfg):
    """The module that rescales a (B, C, h, w) map by ``factor`` and the
    channels of its output (C/4 for 4, C/2 for 2, else C)."""
    if factor == 4.0:
        return (
            nn.Sequential(
                nn.ConvTranspose2d(channels, channels // 2, 2, stride=2),
                build_norm_layer(norm_cfg, channels // 2)[1],
                build_activation_layer(act_cfg),
                nn.ConvTranspose2d(channels // 2, channels // 4, 2, stride=2),
            ),
            channels // 4,
        )
    if factor == 2.0:
        upsample = nn.ConvTranspose2d(channels, channels // 2, 2, stride=2)
        return upsample, channels // 2
    if factor == 1.0:
        return nn.Identity(), channels
    return nn.MaxPool2d(2, stride=2), channels
