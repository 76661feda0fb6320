"""Analytical attention inits: Mimetic and Impulse (operators.md, 6 and 7).

Both write ``layers.{i}.attn.qkv`` (the standard q, k, v rows) and
``layers.{i}.attn.proj`` in the x @ W convention of the papers: torch's
``Linear`` stores W^T, so head h's query rows are ``W_q^h^T`` (d x C) and
``proj.weight`` is ``W_proj^T``. q/k/v and proj biases are zeroed.

- Mimetic (Trockman & Kolter 2023): per layer and head a fresh Z (C x C,
  iid N(0, 1/C)); W_q^h W_k^h^T is the best rank-d approximation of
  alpha1 Z + beta1 I. Per layer a fresh Z for W_v W_proj = alpha2 Z - beta2 I
  (exact, full rank).
- Impulse (Zheng et al. 2025): pos_embed is scaled by 18, and with tokens
  x = LN(pos_embed) head i's q k^T approximates a one-hot shift: patch
  (r, c) attends to (r + m_i, c + n_i), the taps of a 3 x 3 convolution in
  the order centre, up, right, left, down, corners. v/proj as Mimetic's
  (0.4, 0.4).

Neither applies to an operator whose ``proj`` is not C x C (TTT): v/proj
cannot form a C x C map there. Randomness comes from torch's global RNG
(seeded by the runner), in a fixed order: per layer, Mimetic draws the h
q/k matrices Z (head 0 first) then the v/proj Z; Impulse draws the layer's
target noise (shared by its heads) then the v/proj Z.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import TransferError

IMPULSE_TAPS = (4, 1, 5, 3, 7, 0, 2, 6, 8)  # 3x3 kernel positions, row-major
IMPULSE_POS_SCALE = 18.0
IMPULSE_TARGET_PEAK = 1000.0
IMPULSE_TARGET_NOISE = 3.0
IMPULSE_QK_SCALE = 7.0


def draw_mimetic_z(dims: int) -> torch.Tensor:
    """Z (dims x dims) with iid N(0, 1/dims) entries, float64."""
    return torch.randn(dims, dims, dtype=torch.float64) / dims**0.5


def low_rank_factors(
    target: torch.Tensor, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best rank-``rank`` factorisation of ``target`` (Eckart-Young).

    Args:
        target (Tensor): (C, C).
        rank (int): r <= C.

    Returns:
        tuple[Tensor, Tensor]: left (C, r) = U_r S_r^1/2 and right (r, C) =
        S_r^1/2 V_r^T, so left @ right is the truncated SVD of ``target``.
    """
    u, s, vh = torch.linalg.svd(target)
    root = s[:rank].sqrt()
    return u[:, :rank] * root, root[:, None] * vh[:rank]


def mimetic_qk(
    z: torch.Tensor, head_dims: int, alpha: float = 0.7, beta: float = 0.7
) -> tuple[torch.Tensor, torch.Tensor]:
    """One head's query/key maps: w_q @ w_k^T ~ alpha Z + beta I.

    Args:
        z (Tensor): (C, C) random matrix.
        head_dims (int): d, the rank of the product.

    Returns:
        tuple[Tensor, Tensor]: w_q, w_k, each (C, d).
    """
    eye = torch.eye(z.shape[0], dtype=z.dtype)
    left, right = low_rank_factors(alpha * z + beta * eye, head_dims)
    return left, right.T


def mimetic_vp(
    z: torch.Tensor, alpha: float = 0.4, beta: float = 0.4
) -> tuple[torch.Tensor, torch.Tensor]:
    """Value and output maps with w_v @ w_proj = alpha Z - beta I exactly.

    Returns:
        tuple[Tensor, Tensor]: w_v (C, C), w_proj (C, C).
    """
    eye = torch.eye(z.shape[0], dtype=z.dtype)
    return low_rank_factors(alpha * z - beta * eye, z.shape[0])


def impulse_offset(head: int) -> tuple[int, int]:
    """(dy, dx) of head ``head``'s tap: centre, up, right, left, down, then
    the corners, cycling every nine heads."""
    tap = IMPULSE_TAPS[head % len(IMPULSE_TAPS)]
    return tap // 3 - 1, tap % 3 - 1


def shift_matrix(
    hw_shape: tuple[int, int], offset: tuple[int, int]
) -> torch.Tensor:
    """(HW, HW) one-hot map of patch (r, c) to patch (r + dy, c + dx);
    rows of patches whose neighbour falls outside the grid are zero."""
    H, W = hw_shape
    dy, dx = offset
    rows, cols = torch.meshgrid(
        torch.arange(H), torch.arange(W), indexing='ij'
    )
    inside = (
        (rows + dy >= 0) & (rows + dy < H) & (cols + dx >= 0) & (cols + dx < W)
    ).flatten()
    source = torch.arange(H * W)[inside]
    target = ((rows + dy) * W + cols + dx).flatten()[inside]
    shift = torch.zeros(H * W, H * W, dtype=torch.float64)
    shift[source, target] = 1.0
    return shift


def impulse_target(shift: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """T = 1000 Shift + 3 noise where Shift is 0 (HW x HW)."""
    return IMPULSE_TARGET_PEAK * shift + IMPULSE_TARGET_NOISE * noise * (
        shift == 0
    )


def pseudo_inverse_rows(patch_pos: torch.Tensor, rank: int) -> torch.Tensor:
    """P^+ = (P^T P)^+_rank P^T for P = LN(patch_pos) (no affine).

    Args:
        patch_pos (Tensor): (HW, C) patch rows of the scaled pos_embed.
        rank (int): Eigenvalues of P^T P kept (the head width d).

    Returns:
        Tensor: (C, HW).
    """
    p = F.layer_norm(patch_pos, patch_pos.shape[-1:])
    evals, evecs = torch.linalg.eigh(p.T @ p)  # ascending
    evals, evecs = evals[-rank:], evecs[:, -rank:]
    return (evecs / evals) @ evecs.T @ p.T


def impulse_qk(
    p_plus: torch.Tensor, target: torch.Tensor, head_dims: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One head's query/key maps: LN(P) w_q w_k^T LN(P)^T ~ c * target.

    Args:
        p_plus (Tensor): (C, HW) from :func:`pseudo_inverse_rows`.
        target (Tensor): (HW, HW) from :func:`impulse_target`.
        head_dims (int): d.

    Returns:
        tuple[Tensor, Tensor]: w_q, w_k, each (C, d), each 7 times a
        unit-Frobenius-norm factor of A = P^+ T P^+^T.
    """
    left, right = low_rank_factors(p_plus @ target @ p_plus.T, head_dims)
    w_q = IMPULSE_QK_SCALE * left / left.norm()
    w_k = IMPULSE_QK_SCALE * right.T / right.norm()
    return w_q, w_k


def mimetic_init_(
    backbone: nn.Module,
    alpha1: float = 0.7,
    beta1: float = 0.7,
    alpha2: float = 0.4,
    beta2: float = 0.4,
) -> list[tuple[str, int]]:
    """Mimetic init of every layer's attention, in place.

    Args:
        backbone (nn.Module): Has ``layers[i].attn`` with ``qkv``, ``proj``,
            ``embed_dims`` and ``num_heads`` (mmpretrain's
            ``MultiheadAttention`` or an mmlvit operator).

    Returns:
        list[tuple[str, int]]: (name in the backbone, parameters written).
    """
    attns = _checked_attentions(backbone, 'Mimetic')
    written = []
    for i, attn in enumerate(attns):
        C, h = attn.embed_dims, attn.num_heads
        d = C // h
        qk = [
            mimetic_qk(draw_mimetic_z(C), d, alpha1, beta1) for _ in range(h)
        ]
        w_v, w_proj = mimetic_vp(draw_mimetic_z(C), alpha2, beta2)
        written += _write_attention(attn, f'layers.{i}.attn', qk, w_v, w_proj)
    return written


def impulse_init_(backbone: nn.Module) -> list[tuple[str, int]]:
    """Impulse init of every layer's attention, in place; scales a learned
    ``pos_embed`` by 18.

    Args:
        backbone (nn.Module): As for :func:`mimetic_init_`, plus
            ``patch_resolution`` (H, W), ``num_extra_tokens`` and either a
            learned ``pos_embed`` (1, extra + H*W, C) or, when that is None,
            a fixed table from ``position_embedding(hw_shape)``
            (``LinearVisionTransformer`` with sin-cos). A fixed table is
            used unscaled: LN(18 P) = LN(P), so q/k are the same, but the
            model's tokens keep the unscaled table.

    Returns:
        list[tuple[str, int]]: (name in the backbone, parameters written).
    """
    attns = _checked_attentions(backbone, 'Impulse')
    H, W = backbone.patch_resolution
    # Rows in front of the patch positions (registers have none).
    extra = getattr(
        backbone, 'num_pos_extra_tokens', backbone.num_extra_tokens
    )
    pos_embed = getattr(backbone, 'pos_embed', None)
    table, written = None, []
    if pos_embed is None and hasattr(backbone, 'position_embedding'):
        # None without absolute positions (pos_embed_type 'none').
        table = backbone.position_embedding((H, W))
    elif isinstance(pos_embed, torch.Tensor):
        table, written = pos_embed, [('pos_embed', pos_embed.numel())]
    if table is None:
        raise _error(
            'Impulse',
            'it needs a position embedding (the '
            'pseudo-input whose attention pattern it shapes).',
        )
    if table.shape[1] != extra + H * W:
        raise _error(
            'Impulse',
            f'pos_embed {tuple(table.shape)} does not hold '
            f'{extra} extra + {H}x{W} patch rows.',
        )
    if written:
        with torch.no_grad():
            pos_embed.mul_(IMPULSE_POS_SCALE)
    patch_pos = table[0, extra:].detach().double()
    shifts = {}
    for i, attn in enumerate(attns):
        C, h = attn.embed_dims, attn.num_heads
        d = C // h
        p_plus = pseudo_inverse_rows(patch_pos, d)
        noise = torch.nn.init.trunc_normal_(
            torch.empty(H * W, H * W, dtype=torch.float64),
            std=0.6,
            a=-2.0,
            b=2.0,
        )
        qk = []
        for head in range(h):
            offset = impulse_offset(head)
            if offset not in shifts:
                shifts[offset] = shift_matrix((H, W), offset)
            target = impulse_target(shifts[offset], noise)
            qk.append(impulse_qk(p_plus, target, d))
        w_v, w_proj = mimetic_vp(draw_mimetic_z(C))
        written += _write_attention(attn, f'layers.{i}.attn', qk, w_v, w_proj)
    return written


def _checked_attentions(backbone, setting):
    """Every layer's attention, after checking that all can take the init
    (so a failure writes nothing)."""
    attns = [layer.attn for layer in backbone.layers]
    for i, attn in enumerate(attns):
        C = attn.embed_dims
        if attn.qkv.weight.shape[0] < 3 * C or attn.qkv.weight.shape[1] != C:
            raise _error(
                setting,
                f'layers.{i}.attn.qkv is '
                f'{tuple(attn.qkv.weight.shape)}, not 3C x C.',
            )
        if attn.proj.weight.shape != (C, C):
            raise _error(
                setting,
                f'layers.{i}.attn.proj maps '
                f'{attn.proj.weight.shape[1]} -> {attn.proj.weight.shape[0]}'
                f' channels; v/proj must form a {C} x {C} map (operators '
                'with a wider proj, such as TTT, cannot take it).',
            )
    return attns


def _write_attention(attn, prefix, qk, w_v, w_proj):
    """Write per-head (w_q, w_k), w_v and w_proj (x @ W convention) and zero
    the biases; return (name, parameters written)."""
    C, d = attn.embed_dims, attn.embed_dims // attn.num_heads
    weight = attn.qkv.weight
    with torch.no_grad():
        for head, (w_q, w_k) in enumerate(qk):
            rows = slice(head * d, (head + 1) * d)
            weight[rows] = w_q.T.to(weight.dtype)
            weight[C:][rows] = w_k.T.to(weight.dtype)
        weight[2 * C : 3 * C] = w_v.T.to(weight.dtype)
        attn.proj.weight.copy_(w_proj.T)
        written = [
            (f'{prefix}.qkv.weight', 3 * C * C),
            (f'{prefix}.proj.weight', C * C),
        ]
        if attn.qkv.bias is not None:
            attn.qkv.bias[: 3 * C].zero_()
            written.append((f'{prefix}.qkv.bias', 3 * C))
        if attn.proj.bias is not None:
            attn.proj.bias.zero_()
            written.append((f'{prefix}.proj.bias', C))
    return written


def _error(setting, detail):
    return TransferError(f'{setting} init does not apply: {detail}')
