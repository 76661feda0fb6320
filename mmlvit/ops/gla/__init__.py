"""Gated linear attention (GLA, Yang et al. 2024, arXiv:2312.06635),
causal and bidirectional.

Per head, with queries/keys q, k (T x d_k), values v (T x d_v) and log-gates
g = log(alpha) <= 0 (T x d_k), the causal recurrence is::

    S_t = diag(alpha_t) S_{t-1} + k_t^T v_t        (d_k x d_v, S_0 = 0)
    o_t = scale * q_t S_t

(the decay is applied before token t is added), i.e.
``o_t = scale * sum_{s<=t} sum_c q_tc k_sc exp(G_tc - G_sc) v_s`` with
G = cumsum(g). The bidirectional operator for image tokens (ViG,
arXiv:2405.18425) averages a forward scan and a scan over the reversed
sequence with its own gates::

    o = (o^f + flip(o^b)) / 2

All ops take the layout (B, H, T, d), run with autocast off, keep states,
gates and decays in at least fp32 (fp64 for fp64 inputs; see
:mod:`mmlvit.ops.common.precision`) and return the dtype of ``v`` (of ``q`` for
the map). ``scale`` defaults to d_k^-1/2, fla's default (the GLA paper uses
none).

Modules, as fla's ``ops/gla``:

- ``naive``: the token-by-token recurrence and the explicit T x T map
  (references).
- ``chunk`` (with its data layout in ``workspace``): the chunked scan in
  PyTorch, its written-out backward and autograd Function.
- ``triton_kernels`` (forward), ``triton_backward_kernels`` and
  ``triton_backend``: both directions fused in our own Triton kernels and
  their autograd Function.
- ``fla_backend``: the same operator by fla's Triton ``chunk_gla``.
- ``gates`` (kernels in ``gate_kernels``): the log-gates from the
  low-rank gate projection, fused where the scan's kernels run, and
  their cumulative sums within chunks (``within_chunks``), the form the
  fused scan takes them in.
- ``dispatch``: ``bidirectional_gla``, which checks the backend and picks
  one, and ``bidirectional_gla_gated``, the same with gates recomputed in
  backward.
"""

from .chunk import gla_chunked
from .dispatch import (
    BACKENDS,
    bidirectional_gla,
    bidirectional_gla_gated,
    check_backend,
    resolve_backend,
)
from .gates import log_gates
from .naive import bidirectional_gla_map, gla_recurrent

__all__ = [
    'BACKENDS',
    'bidirectional_gla',
    'bidirectional_gla_gated',
    'bidirectional_gla_map',
    'check_backend',
    'gla_chunked',
    'gla_recurrent',
    'log_gates',
    'resolve_backend',
]
