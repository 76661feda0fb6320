"""Register tokens (DINOv2 with registers, arXiv 2309.16588): extra
learned tokens between the class (and distillation) token and the patches,
with no position and no output of their own."""

import torch
import torch.nn as nn
from torch import Tensor

from .token_layout import patch_only_operators

# A class token, a distillation token and up to this many registers.
MAX_REGISTER_TOKENS = 16


def add_register_tokens(backbone: nn.Module, attn_cfgs: list) -> nn.Parameter:
    """``reg_token`` (1, R, C) for ``backbone.num_register_tokens`` = R,
    counted into ``backbone.num_extra_tokens``; None when R is 0.

    Raises:
        ValueError: R is not an integer in [0, 16], or an operator mixes
            patch tokens only (it takes no token before the patches).
    """
    count = backbone.num_register_tokens
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or not 0 <= count <= MAX_REGISTER_TOKENS
    ):
        raise ValueError(
            f'num_register_tokens must be an integer from 0 to '
            f'{MAX_REGISTER_TOKENS}, got {count!r}.'
        )
    if not count:
        return None
    patch_only = patch_only_operators(attn_cfgs)
    if patch_only:
        raise ValueError(
            f'{patch_only[0]} mixes patch tokens only and takes no register '
            f'tokens, but num_register_tokens={count}: set it to 0 (the '
            'registers are then not copied) or use an operator that takes '
            'tokens before the patches (e.g. GatedLinearAttention).'
        )
    backbone.num_extra_tokens += count
    return nn.Parameter(torch.zeros(1, count, backbone.embed_dims))


def insert_register_tokens(
    x: Tensor, reg_token: Tensor | None, position: int
) -> Tensor:
    """(B, position + H*W, C) tokens, positions added -> (B, position + R +
    H*W, C) with the registers after the first ``position`` tokens."""
    if reg_token is None:
        return x
    registers = reg_token.expand(x.shape[0], -1, -1).to(x.dtype)
    return torch.cat((x[:, :position], registers, x[:, position:]), dim=1)
