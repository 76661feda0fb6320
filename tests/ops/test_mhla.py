"""MHLA's linear-time path against a per-token float64 oracle."""

import math

import pytest
import torch

from mmlvit.ops import (
    mhla_attention,
    mhla_attention_map,
    mhla_block_index,
    mhla_linear_mixing,
)

EPS = 1e-6


def phi(x):
    return torch.relu(x) + EPS


def block_of_token(hw_shape, side):
    """Block of every raster-order token, from its grid position."""
    H, W = hw_shape
    rows, cols = math.ceil(H / side), math.ceil(W / side)
    return [(r // rows) * side + c // cols for r in range(H) for c in range(W)]


def mhla_oracle(q, k, v, mixing, hw_shape):
    """Paper Eq. 4 token by token: block sums, mixing, per-query normaliser.

    q, k, v: (B, h, N, d) float64; mixing (M, M). Returns (B, h, N, d).
    """
    M = mixing.shape[0]
    side = math.isqrt(M)
    blocks = block_of_token(hw_shape, side)
    B, h, N, d = q.shape
    kv = [q.new_zeros(B, h, d, d) for _ in range(M)]
    k_sum = [q.new_zeros(B, h, d) for _ in range(M)]
    for j in range(N):
        b = blocks[j]
        kv[b] = kv[b] + phi(k[:, :, j, :, None]) * v[:, :, j, None, :]
        k_sum[b] = k_sum[b] + phi(k[:, :, j])
    out = torch.empty_like(q)
    for t in range(N):
        i = blocks[t]
        mixed_kv = sum(mixing[i, b] * kv[b] for b in range(M))
        mixed_sum = sum(mixing[i, b] * k_sum[b] for b in range(M))
        query = phi(q[:, :, t])
        numerator = torch.einsum('bhd,bhde->bhe', query, mixed_kv)
        denominator = (query * mixed_sum).sum(-1, keepdim=True) + EPS
        out[:, :, t] = numerator / denominator
    return out


def random_qkv(hw_shape, batch=2, heads=2, dims=4, dtype=torch.float64):
    N = hw_shape[0] * hw_shape[1]
    return [torch.randn(batch, heads, N, dims, dtype=dtype) for _ in range(3)]


def random_mixing(side, dtype=torch.float64):
    return torch.rand(side * side, side * side, dtype=dtype)


def test_linear_mixing_2x2_values():
    expected = torch.tensor(
        [
            [0.6306, 0.1847, 0.1847, 0.0],
            [0.1847, 0.6306, 0.0, 0.1847],
            [0.1847, 0.0, 0.6306, 0.1847],
            [0.0, 0.1847, 0.1847, 0.6306],
        ]
    )
    mixing = mhla_linear_mixing(2)
    torch.testing.assert_close(mixing, expected, atol=5e-5, rtol=0)
    # Exact values: self 1 / (1 + 2c), edge c / (1 + 2c), c = 1 - 1/sqrt 2.
    c = 1 - 2**-0.5
    assert mixing[0, 0].item() == pytest.approx(1 / (1 + 2 * c), abs=1e-7)
    assert mixing[0, 1].item() == pytest.approx(c / (1 + 2 * c), abs=1e-7)


def test_linear_mixing_general_grid():
    """4 x 4 blocks (the official 256 px setting): the formula, column by
    column."""
    centres = [(r, c) for r in range(4) for c in range(4)]
    dist = torch.tensor(
        [[math.dist(a, b) for b in centres] for a in centres],
        dtype=torch.float64,
    )
    closeness = 1 - dist / dist.max()
    expected = closeness / closeness.sum(0)
    torch.testing.assert_close(
        mhla_linear_mixing(4).double(), expected, rtol=0, atol=1e-7
    )
    assert expected[0, 15] == 0 and expected[3, 12] == 0


def test_linear_mixing_needs_two_blocks_per_side():
    with pytest.raises(ValueError, match='blocks_per_side >= 2'):
        mhla_linear_mixing(1)


def test_block_index_pads_bottom_right():
    # 7 x 9 grid, 2 x 2 blocks of 4 x 5 tokens.
    index = mhla_block_index((7, 9), 2).reshape(7, 9)
    assert (
        index.tolist()
        == torch.tensor(block_of_token((7, 9), 2)).reshape(7, 9).tolist()
    )
    assert (index[:4, :5] == 0).all() and (index[:4, 5:] == 1).all()
    assert (index[4:, :5] == 2).all() and (index[4:, 5:] == 3).all()


@pytest.mark.parametrize(
    'hw_shape, side',
    [((14, 14), 2), ((7, 9), 2), ((24, 24), 2), ((14, 14), 3), ((8, 8), 4)],
)
def test_forward_matches_per_token_oracle(hw_shape, side):
    torch.manual_seed(0)
    q, k, v = random_qkv(hw_shape)
    mixing = random_mixing(side)
    out = mhla_attention(q, k, v, mixing, hw_shape)
    assert out.shape == q.shape and out.dtype == torch.float64
    torch.testing.assert_close(
        out, mhla_oracle(q, k, v, mixing, hw_shape), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9)])
def test_map_is_the_stated_formula_and_reproduces_forward(hw_shape):
    torch.manual_seed(1)
    q, k, v = random_qkv(hw_shape)
    mixing = random_mixing(2)
    attn = mhla_attention_map(q, k, mixing, hw_shape)
    blocks = torch.tensor(block_of_token(hw_shape, 2))
    scores = phi(q) @ phi(k).transpose(-2, -1)
    scores = scores * mixing[blocks][:, blocks]
    expected = scores / (scores.sum(-1, keepdim=True) + EPS)
    torch.testing.assert_close(attn, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        attn @ v,
        mhla_attention(q, k, v, mixing, hw_shape),
        rtol=1e-10,
        atol=1e-10,
    )


def test_float32_path_matches_map_form():
    torch.manual_seed(2)
    q, k, v = random_qkv((14, 14), dtype=torch.float32)
    mixing = mhla_linear_mixing(2)
    torch.testing.assert_close(
        mhla_attention(q, k, v, mixing, (14, 14)),
        mhla_attention_map(q, k, mixing, (14, 14)) @ v,
        rtol=1e-5,
        atol=1e-5,
    )


def official_code_output(q, k, v, mixing, hw_shape):
    """The official code's form: its normaliser for query t in block i is
    sum_b W[i, b] phi(q_{pi_b(t)}) . z_b, pi_b(t) = the token at t's offset
    inside block b (equal-size blocks only)."""
    blocks = block_of_token(hw_shape, 2)
    members = [[j for j, b in enumerate(blocks) if b == m] for m in range(4)]
    kv = [
        phi(k[:, :, idx]).transpose(-2, -1) @ v[:, :, idx] for idx in members
    ]
    k_sum = [phi(k[:, :, idx]).sum(-2) for idx in members]
    out = torch.empty_like(q)
    for i, idx in enumerate(members):
        mixed_kv = sum(mixing[i, b] * kv[b] for b in range(4))
        numerator = phi(q[:, :, idx]) @ mixed_kv
        denominator = (
            sum(
                mixing[i, b] * (phi(q[:, :, members[b]]) @ k_sum[b][..., None])
                for b in range(4)
            )
            + EPS
        )
        out[:, :, idx] = numerator / denominator
    return out


def test_paper_normaliser_not_the_official_code_one():
    """Flags the [P] deviation: equal for a diagonal W, different for the
    linear init (which mixes blocks)."""
    torch.manual_seed(6)
    q, k, v = random_qkv((14, 14))
    diagonal = torch.eye(4, dtype=torch.float64) * 0.7
    torch.testing.assert_close(
        mhla_attention(q, k, v, diagonal, (14, 14)),
        official_code_output(q, k, v, diagonal, (14, 14)),
    )
    mixing = mhla_linear_mixing(2).double()
    ours = mhla_attention(q, k, v, mixing, (14, 14))
    official = official_code_output(q, k, v, mixing, (14, 14))
    assert (ours - official).abs().max() > 1e-2 * ours.abs().max()


def test_gradcheck():
    torch.manual_seed(4)
    q, k, v = (t.requires_grad_() for t in random_qkv((3, 5), 1, 2, 3))
    mixing = random_mixing(2).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda q, k, v, w: mhla_attention(q, k, v, w, (3, 5)),
        (q, k, v, mixing),
    )


def test_rejects_non_square_block_count():
    q, k, v = random_qkv((4, 4))
    with pytest.raises(ValueError, match='M a square'):
        mhla_attention(q, k, v, torch.rand(3, 3, dtype=q.dtype), (4, 4))


@pytest.mark.parametrize(
    'dtype, magnitude', [(torch.bfloat16, 1e3), (torch.float16, 100.0)]
)
def test_autocast_stays_finite(dtype, magnitude):
    """Large inputs under autocast: the fp32 path stays finite and close to
    the fp32 result."""
    torch.manual_seed(5)
    q, k, v = (
        t * magnitude for t in random_qkv((24, 24), 1, 2, 8, torch.float32)
    )
    mixing = mhla_linear_mixing(2)
    reference = mhla_attention(q, k, v, mixing, (24, 24))
    q16, k16, v16 = (t.to(dtype) for t in (q, k, v))
    if dtype == torch.float16:
        # The block summaries would overflow a float16 result.
        assert not torch.isfinite(phi(k16).transpose(-2, -1) @ v16).all()
    with torch.autocast('cpu', dtype=dtype):
        out = mhla_attention(q16, k16, v16, mixing, (24, 24))
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    # A convex mix of the values: within their range, near the fp32 result.
    assert out.abs().max() <= v16.abs().max() * 1.01
    scale = reference.abs().max()
    assert (out.float() - reference).abs().max() < 0.05 * scale
