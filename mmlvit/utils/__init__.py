# The benchmark helpers live in mmlvit.benchmark; these names stay importable
# from here.
from mmlvit.benchmark import (
    measure_step,
    peak_resident_growth_mib,
    reset_peak_resident,
    resident_kib,
    run_in_child,
)

__all__ = [
    'measure_step',
    'peak_resident_growth_mib',
    'reset_peak_resident',
    'resident_kib',
    'run_in_child',
]
