"""Measurements of a conversion: how far a student is from its teacher."""

from .conversion import (
    BLOCK_METRICS,
    ArchitectureMismatch,
    ConversionDiagnosis,
    check_comparable,
    diagnose_conversion,
    map_total_variation,
)

__all__ = [
    'BLOCK_METRICS',
    'ArchitectureMismatch',
    'ConversionDiagnosis',
    'check_comparable',
    'diagnose_conversion',
    'map_total_variation',
]
