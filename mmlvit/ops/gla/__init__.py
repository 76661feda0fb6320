"""Gated linear attention (GLA, Yang et al. 2024, arXiv:2312.06635),
causal and bidirectional (ViG, arXiv:2405.18425), as fla's ``ops/gla``:
the math, the modules and the launch choices are in this folder's
README.md.

All ops take the layout (B, H, T, d), run with autocast off, keep states,
gates and decays in at least fp32 (fp64 for fp64 inputs) and return the
dtype of ``v`` (of ``q`` for the map). ``scale`` defaults to d_k^-1/2.
"""

from .chunk import gla_chunked
from .gates import gated_rms_norm, log_gates
from .naive import bidirectional_gla_map, gla_recurrent
from .triton_function import (
    BACKENDS,
    bidirectional_gla,
    bidirectional_gla_gated,
    check_backend,
    resolve_backend,
)

__all__ = [
    'BACKENDS',
    'bidirectional_gla',
    'bidirectional_gla_gated',
    'bidirectional_gla_map',
    'check_backend',
    'gated_rms_norm',
    'gla_chunked',
    'gla_recurrent',
    'log_gates',
    'resolve_backend',
]
