from .process_benchmark import measure_step, run_in_child
from .resident_memory import (
    peak_resident_growth_mib,
    reset_peak_resident,
    resident_kib,
)

__all__ = [
    'measure_step',
    'peak_resident_growth_mib',
    'reset_peak_resident',
    'resident_kib',
    'run_in_child',
]
