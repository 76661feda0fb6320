"""LinearVisionTransformer: mmpretrain's ViT with a pluggable attention."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import ModuleList
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.models.utils import resize_pos_embed
from mmpretrain.registry import MODELS
from torch import Tensor

from .linear_encoder_layer import LinearTransformerEncoderLayer
from .position_embedding import sincos_position_embedding
from .register_tokens import add_register_tokens, insert_register_tokens
from .rope import AxialRope, check_rope_support
from .token_layout import per_layer_attn_cfgs, token_layout

POS_EMBED_TYPES = ('learned', 'sincos', 'none')


@MODELS.register_module()
class LinearVisionTransformer(VisionTransformer):
    """Vision Transformer with a pluggable (e.g. linear) attention operator.

    A drop-in replacement for mmpretrain's ``VisionTransformer``: the same
    arguments (arch zoo or custom dict, ``out_type``, ``final_norm``,
    ``frozen_stages``, ``layer_cfgs``, ``pre_norm``, ...), the same
    state-dict names, outputs and layer-wise depths, plus the attention
    operator. With ``attn_cfg=dict(type='SoftmaxAttention')`` it computes the
    same function as ``VisionTransformer`` and loads its checkpoints
    strictly. Every attention module gets the patch grid (H, W) of the
    current input, at any resolution.

    Args:
        attn_cfg (dict | list[dict]): Attention operator config (``type``
            and the operator's own arguments; width and heads come from
            ``arch``), one for every layer or a list with one per layer (e.g.
            linear blocks with softmax in the last ones). Keyword only.
        pos_embed_type (str, optional): ``'learned'`` (a Parameter, resized
            to other grids like mmpretrain does), ``'sincos'`` (fixed 2-D
            sin-cos computed for the current grid; the class token, if any,
            gets no position) or ``'none'`` (no absolute position: models
            whose positions are rotary only, ``rope_cfg``; e.g. DINOv3).
            Keyword only; the default is below.
        with_dist_token (bool): A distillation token (DeiT, arXiv
            2012.12877) after the class token: ``dist_token`` (1, 1, C),
            ``num_extra_tokens`` = 2, a learned position for it, and
            ``out_type='cls_token'`` returns the pair (class, distillation)
            of (B, C) features that mmpretrain's ``DeiTClsHead`` averages.
            Needs a class token. Keyword only. Defaults to False.
        rope_cfg (dict, optional): Rotary position embedding on every
            layer's q and k (patch tokens only), e.g. ``dict(type='eva02',
            ref_feat_shape=(16, 16))``; the arguments of
            :class:`~.rope.AxialRope`. Tables are built for each forward's
            grid (no weights). Every operator must have ``supports_rope``.
            Keyword only. Defaults to None.
        num_register_tokens (int): R registers (DINOv2, arXiv 2309.16588):
            ``reg_token`` (1, R, C) after the class (and distillation) token,
            with no position (``pos_embed`` has no rows for them);
            ``num_extra_tokens`` counts them, ``num_pos_extra_tokens`` not.
            Not with patch-tokens-only operators. Keyword only. Defaults
            to 0.

        with_cls_token (bool, optional): Prepend a class token. Defaults to
            None: True, unless an operator mixes patch tokens only
            (``patch_tokens_only``, e.g. MHLA, TTT), which takes none; True
            with such an operator is an error.
        out_type (str, optional): As ``VisionTransformer``'s. Defaults to
            None: ``'cls_token'`` with a class token, else
            ``'avg_featmap'``.
        pos_embed_type (str, optional): ``'learned'``, ``'sincos'`` or
            ``'none'``. Defaults to None: ``'sincos'`` when an operator
            mixes patch tokens only (Qin et al.'s protocol for MHLA and
            TTT), else ``'learned'``.

    The other arguments are ``VisionTransformer``'s (``norm_cfg`` defaults to
    LN with eps 1e-6, ``patch_cfg`` and ``layer_cfgs`` to empty dicts).

    As a dense-prediction backbone (MMSegmentation, MMDetection: type
    ``'mmpretrain.LinearVisionTransformer'``), ``out_type='featmap'`` with
    ``out_indices=(i, j, ...)`` (a tuple or list; negative entries count
    from the end) returns one (B, C, ceil(H/p), ceil(W/p)) map per index for
    any (B, in_channels, H, W) input: the patch embedding pads the bottom
    and right edges to a multiple of the patch size p (mmcv's ``'corner'``
    padding), learned positions are resized and sin-cos ones computed for
    that grid. ``final_norm`` normalises the last layer's output only.
    Frozen stages stay in eval mode in ``train()``.
    """

    def __init__(
        self,
        arch='base',
        img_size=224,
        patch_size=16,
        in_channels=3,
        out_indices=-1,
        drop_rate=0.0,
        drop_path_rate=0.0,
        qkv_bias=True,
        norm_cfg=None,
        final_norm=True,
        out_type=None,
        with_cls_token=None,
        frozen_stages=-1,
        interpolate_mode='bicubic',
        layer_scale_init_value=0.0,
        patch_cfg=None,
        layer_cfgs=None,
        pre_norm=False,
        init_cfg=None,
        *,
        attn_cfg,
        pos_embed_type=None,
        with_dist_token=False,
        rope_cfg=None,
        num_register_tokens=0,
    ):
        with_cls_token, out_type, pos_embed_type = token_layout(
            attn_cfg, with_cls_token, out_type, pos_embed_type
        )
        if pos_embed_type not in POS_EMBED_TYPES:
            raise ValueError(
                f'Unknown pos_embed_type {pos_embed_type!r}; '
                f'choose from {POS_EMBED_TYPES}.'
            )
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)
        layer_cfgs = layer_cfgs or dict()
        # mmpretrain writes negative indices back into the sequence: give it
        # a fresh list (a config's tuple cannot be written, its list must not
        # change).
        if not isinstance(out_indices, int):
            out_indices = list(out_indices)
        # mmpretrain builds softmax layers here; they are replaced below.
        super().__init__(
            arch=arch,
            img_size=img_size,
            patch_size=patch_size,
            in_channels=in_channels,
            out_indices=out_indices,
            drop_rate=drop_rate,
            qkv_bias=qkv_bias,
            norm_cfg=norm_cfg,
            final_norm=final_norm,
            patch_cfg=patch_cfg or dict(),
            out_type=out_type,
            with_cls_token=with_cls_token,
            frozen_stages=frozen_stages,
            interpolate_mode=interpolate_mode,
            pre_norm=pre_norm,
            init_cfg=init_cfg,
        )
        embed_dims = self.embed_dims
        num_heads = self.arch_settings['num_heads']
        if embed_dims % num_heads != 0:
            raise ValueError(
                f'num_heads={num_heads} must divide '
                f'embed_dims={embed_dims} (arch {arch}).'
            )
        attn_cfgs = per_layer_attn_cfgs(attn_cfg, self.num_layers)

        self.dist_token = None
        if with_dist_token:
            self._add_dist_token(with_cls_token, pos_embed_type)
        self.num_pos_extra_tokens = self.num_extra_tokens
        self.num_register_tokens = num_register_tokens
        self.reg_token = add_register_tokens(self, attn_cfgs)
        self.pos_embed_type = pos_embed_type
        if pos_embed_type == 'sincos':
            if embed_dims % 4 != 0:
                raise ValueError(
                    'pos_embed_type="sincos" needs embed_dims '
                    f'divisible by 4, got {embed_dims}.'
                )
            self.pos_embed = None
        elif pos_embed_type == 'none':
            self.pos_embed = None

        if isinstance(layer_cfgs, dict):
            layer_cfgs = [layer_cfgs] * self.num_layers
        # Python floats: mmcv's drop_path branches on the rate, which
        # torch.compile(fullgraph=True) cannot trace as a numpy value.
        drop_path_rates = np.linspace(
            0, drop_path_rate, self.num_layers
        ).tolist()
        self.layers = ModuleList()
        for i in range(self.num_layers):
            layer_cfg = dict(
                embed_dims=embed_dims,
                num_heads=num_heads,
                feedforward_channels=self.arch_settings[
                    'feedforward_channels'
                ],
                attn_cfg=attn_cfgs[i],
                layer_scale_init_value=layer_scale_init_value,
                drop_rate=drop_rate,
                drop_path_rate=drop_path_rates[i],
                qkv_bias=qkv_bias,
                norm_cfg=norm_cfg,
            )
            layer_cfg.update(layer_cfgs[i])
            self.layers.append(LinearTransformerEncoderLayer(**layer_cfg))
            self.layers[-1].attn.prefix_tokens = self.num_extra_tokens

        self.rope = None
        if rope_cfg is not None:
            check_rope_support(layer.attn for layer in self.layers)
            self.rope = AxialRope(embed_dims // num_heads, **rope_cfg)
        if self.frozen_stages > 0:
            self._freeze_stages()

    def _add_dist_token(self, with_cls_token, pos_embed_type):
        if not with_cls_token:
            raise ValueError(
                'with_dist_token=True needs a class token before it: set '
                'with_cls_token=True (with an operator that takes one) or '
                'drop with_dist_token.'
            )
        self.num_extra_tokens = 2
        self.dist_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        if pos_embed_type == 'learned':
            rows = self.pos_embed.shape[1] + 1
            self.pos_embed = nn.Parameter(
                torch.zeros(1, rows, self.embed_dims)
            )

    def init_weights(self) -> None:
        """mmpretrain's init, and the distillation and register tokens (if
        any) drawn like DeiT's (truncated normal, std 0.02)."""
        super().init_weights()
        pretrained = (
            isinstance(self.init_cfg, dict)
            and self.init_cfg.get('type') == 'Pretrained'
        )
        for token in (self.dist_token, self.reg_token):
            if token is not None and not pretrained:
                trunc_normal_(token, std=0.02)

    def _freeze_stages(self) -> None:
        super()._freeze_stages()
        # mmpretrain's __init__ freezes before the token exists.
        for name in ('dist_token', 'reg_token'):
            if getattr(self, name, None) is not None:
                getattr(self, name).requires_grad = False

    def _format_output(self, x: Tensor, hw_shape: tuple[int, int]):
        if self.dist_token is not None and self.out_type == 'cls_token':
            return x[:, 0], x[:, 1]
        return super()._format_output(x, hw_shape)

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """mmpretrain's layer-wise depth (for learning-rate decay), with
        every token before the patches (class, distillation, registers) and
        the pre-norm in the stem, depth 0, as the class token is."""
        name = param_name[len(prefix) :]
        if param_name.startswith(prefix) and (
            name in ('dist_token', 'reg_token') or name.startswith('pre_norm.')
        ):
            return 0, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)

    def train(self, mode: bool = True) -> 'LinearVisionTransformer':
        """Set the training mode; frozen stages (``frozen_stages``) stay in
        eval mode, so their dropout and drop path stay off."""
        super().train(mode)
        if mode and self.frozen_stages > 0:
            self._freeze_stages()
        return self

    def _prepare_pos_embed(self, state_dict, prefix, *args, **kwargs):
        # A fixed sin-cos embedding has nothing to load: a checkpoint's
        # learned table stays an unexpected key. mmpretrain resizes the
        # table with num_extra_tokens rows in front: registers have none.
        if self.pos_embed is not None:
            extra, self.num_extra_tokens = (
                self.num_extra_tokens,
                self.num_pos_extra_tokens,
            )
            try:
                super()._prepare_pos_embed(state_dict, prefix, *args, **kwargs)
            finally:
                self.num_extra_tokens = extra

    def position_embedding(
        self,
        hw_shape: tuple[int, int],
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        """Position embedding of every token for a patch grid.

        Args:
            hw_shape (tuple[int, int]): Patch grid (H, W) of the input.
            device (torch.device, optional): For the sin-cos embedding.
            dtype (torch.dtype, optional): Float type the sin-cos embedding
                is computed in. Defaults to float32.

        Returns:
            Tensor | None: (1, num_pos_extra_tokens + H*W, C): registers
            have no position; None with ``pos_embed_type='none'``.
        """
        if self.pos_embed_type == 'none':
            return None
        if self.pos_embed is not None:
            return resize_pos_embed(
                self.pos_embed,
                self.patch_resolution,
                hw_shape,
                mode=self.interpolate_mode,
                num_extra_tokens=self.num_pos_extra_tokens,
            )
        pos = sincos_position_embedding(
            hw_shape, self.embed_dims, device=device, dtype=dtype
        )
        return F.pad(pos, (0, 0, self.num_pos_extra_tokens, 0))

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """(B, in_channels, H_img, W_img) -> tuple of ``out_type`` features,
        one per ``out_indices`` entry."""
        B = x.shape[0]
        x, hw_shape = self.patch_embed(x)
        extra = [self.cls_token, self.dist_token]
        extra = [
            token.expand(B, -1, -1) for token in extra if token is not None
        ]
        x = torch.cat((*extra, x), dim=1)
        # A sin-cos table in at least fp32 (fp64 for an fp64 model).
        table_dtype = torch.promote_types(x.dtype, torch.float32)
        pos = self.position_embedding(hw_shape, x.device, table_dtype)
        if pos is not None:
            x = x + pos.to(x.dtype)
        # [class, (distillation), registers, patches]
        x = insert_register_tokens(
            x, self.reg_token, self.num_pos_extra_tokens
        )
        x = self.pre_norm(self.drop_after_pos(x))
        rope = None
        if self.rope is not None:
            rope = self.rope(hw_shape, x.device, table_dtype)

        outs = []
        for i, layer in enumerate(self.layers):
            x = layer(x, hw_shape, rope)
            if i == len(self.layers) - 1 and self.final_norm:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw_shape))
        return tuple(outs)
