"""Checks and defaults shared by the GLA ops."""


def check_shapes(q, k, v, *gates):
    """Raise a ValueError unless q, k and the gates are one (B, H, T, d_k)
    shape and v is (B, H, T, d_v)."""
    if q.dim() != 4 or any(t.shape != q.shape for t in (k, *gates)):
        raise ValueError(
            'q, k and the gates must share one (B, H, T, d_k) shape; got '
            f'{[tuple(t.shape) for t in (q, k, *gates)]}.'
        )
    if v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f'v must be (B, H, T, d_v) with (B, H, T) = {tuple(q.shape[:3])}; '
            f'got {tuple(v.shape)}.'
        )


def default_scale(q, scale):
    """``scale``, or d_k^-1/2 for q (B, H, T, d_k) when it is None (fla's
    default; the GLA paper, arXiv:2312.06635, uses none)."""
    return q.shape[-1] ** -0.5 if scale is None else scale
