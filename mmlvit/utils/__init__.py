from .resident_memory import (
    peak_resident_growth_mib,
    reset_peak_resident,
    resident_kib,
)

__all__ = ['peak_resident_growth_mib', 'reset_peak_resident', 'resident_kib']
