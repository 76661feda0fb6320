"""Rotary position embedding: the rotation against explicit float64
rotation matrices, the tables against timm's EVA-02 and DINOv3 RoPE, and
kernel attention with RoPE against the RoFormer formula entry by entry."""

import pytest
import torch
from rope_oracle import random_angles, rotation_matrix, tables
from timm.layers.pos_embed_sincos import (
    RotaryEmbeddingCat,
    RotaryEmbeddingDinoV3,
)

from mmlvit.models.backbones.rope import AxialRope
from mmlvit.ops.common.rope import apply_rope
from mmlvit.ops.kernel import (
    kernel_attention_map_rope,
    kernel_linear_attention_rope,
)


@pytest.mark.parametrize('half', [False, True])
@pytest.mark.parametrize('prefix', [0, 1, 3])
def test_rotation_equals_rotation_matrices(half, prefix):
    B, h, P, d = 2, 2, 6, 8
    angles = random_angles(P, d)
    x = torch.randn(B, h, prefix + P, d, dtype=torch.float64)
    out = apply_rope(x, tables(angles, half))
    assert torch.equal(out[..., :prefix, :], x[..., :prefix, :])
    for p in range(P):
        expected = x[..., prefix + p, :] @ rotation_matrix(angles[p], half).T
        torch.testing.assert_close(out[..., prefix + p, :], expected)


def test_rotation_keeps_dtype_and_refuses_wrong_tables():
    rope = tables(random_angles(4, 8), False)
    x = torch.randn(1, 1, 5, 8, dtype=torch.bfloat16)
    assert (
        apply_rope(
            x, rope._replace(sin=rope.sin.float(), cos=rope.cos.float())
        ).dtype
        == torch.bfloat16
    )
    with pytest.raises(ValueError, match='build them for this grid'):
        apply_rope(torch.randn(1, 1, 3, 8), rope)
    with pytest.raises(ValueError, match='4 patches x 8 channels'):
        apply_rope(torch.randn(1, 1, 5, 4), rope)


@pytest.mark.parametrize('hw', [(4, 4), (3, 5)])
@pytest.mark.parametrize('ref', [None, (16, 16)])
def test_eva02_tables_equal_timm(hw, ref):
    d = 16
    timm_rope = RotaryEmbeddingCat(dim=d, in_pixels=False, ref_feat_shape=ref)
    sin, cos = timm_rope.get_embed(shape=list(hw)).chunk(2, -1)
    ours = AxialRope(d, type='eva02', ref_feat_shape=ref)(hw)
    assert not ours.half
    torch.testing.assert_close(ours.sin, sin, rtol=0, atol=0)
    torch.testing.assert_close(ours.cos, cos, rtol=0, atol=0)


@pytest.mark.parametrize('hw', [(4, 4), (3, 5)])
@pytest.mark.parametrize('normalize', ['separate', 'max'])
def test_dinov3_tables_equal_timm(hw, normalize):
    d = 16
    timm_rope = RotaryEmbeddingDinoV3(dim=d, normalize_coords=normalize)
    sin, cos = timm_rope.get_embed(shape=list(hw)).chunk(2, -1)
    ours = AxialRope(d, type='dinov3', normalize_coords=normalize)(hw)
    assert ours.half
    torch.testing.assert_close(ours.sin, sin, rtol=0, atol=0)
    torch.testing.assert_close(ours.cos, cos, rtol=0, atol=0)


def test_rope_options_are_checked():
    with pytest.raises(ValueError, match='Unknown rope_cfg type'):
        AxialRope(16, type='xpos')
    with pytest.raises(ValueError, match='divisible by 4'):
        AxialRope(6)
    with pytest.raises(ValueError, match="'eva02' option"):
        AxialRope(16, type='dinov3', ref_feat_shape=(16, 16))


@pytest.mark.parametrize('kernel', ['elu', 'relu'])
def test_kernel_attention_with_rope_equals_roformer_formula(kernel):
    """o_i = sum_j [R_i phi(q_i)].[R_j phi(k_j)] v_j / (sum_j phi(q_i).
    phi(k_j) + eps), the class token (first) not rotated."""
    B, h, P, d, eps = 1, 2, 6, 8, 1e-6
    angles = random_angles(P, d, seed=3)
    rope = tables(angles, False)
    q, k, v = (
        torch.randn(B, h, P + 1, d, dtype=torch.float64) for _ in range(3)
    )
    phi = {
        'elu': lambda x: torch.where(x > 0, x + 1, x.exp()),
        'relu': lambda x: x.clamp(min=0),
    }[kernel]
    R = [torch.eye(d, dtype=torch.float64)] + [
        rotation_matrix(a, False) for a in angles
    ]
    expected = torch.zeros_like(v)
    attn = torch.zeros(B, h, P + 1, P + 1, dtype=torch.float64)
    for b in range(B):
        for head in range(h):
            pq, pk = phi(q[b, head]), phi(k[b, head])
            for i in range(P + 1):
                den = sum(pq[i] @ pk[j] for j in range(P + 1)) + eps
                for j in range(P + 1):
                    attn[b, head, i, j] = (R[i] @ pq[i]) @ (R[j] @ pk[j]) / den
            expected[b, head] = attn[b, head] @ v[b, head]
    out = kernel_linear_attention_rope(q, k, v, rope, kernel=kernel, eps=eps)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(
        kernel_attention_map_rope(q, k, rope, kernel=kernel, eps=eps), attn
    )
