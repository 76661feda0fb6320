"""The benchmarks' device-aware core: timing by CUDA events or the wall
clock, peak memory, FLOP counts, a grid runner, tables, verdicts and plots.
Each tool under ``tools/analysis/benchmark_*.py`` only describes its cases.
"""

from .flops import CPU_SDPA_FLOPS, FlopCountedStep, count_flops
from .grid import run_grid
from .memory import cuda_peak_growth_mib, peak_growth_mib, run_memory_worker
from .options import (
    DTYPES,
    add_device_arguments,
    add_timing_arguments,
    autocast,
    check_device_arguments,
    cuda_unavailable_reason,
    describe_device,
)
from .process import run_case, run_in_child, run_in_process
from .report import (
    compare,
    linear_fit_error,
    markdown_table,
    nested_set,
    ratio,
    status,
    verdict,
    write_json,
)
from .resident_memory import (
    peak_resident_growth_mib,
    reset_peak_resident,
    resident_kib,
)
from .timing import (
    Deadline,
    first_call_seconds,
    interleaved_times,
    measure_step,
    steady_seconds,
    synchronize,
    time_call,
)

__all__ = [
    'CPU_SDPA_FLOPS',
    'DTYPES',
    'Deadline',
    'FlopCountedStep',
    'add_device_arguments',
    'add_timing_arguments',
    'autocast',
    'check_device_arguments',
    'compare',
    'count_flops',
    'cuda_peak_growth_mib',
    'cuda_unavailable_reason',
    'describe_device',
    'first_call_seconds',
    'interleaved_times',
    'linear_fit_error',
    'markdown_table',
    'measure_step',
    'nested_set',
    'peak_growth_mib',
    'peak_resident_growth_mib',
    'ratio',
    'reset_peak_resident',
    'resident_kib',
    'run_case',
    'run_grid',
    'run_in_child',
    'run_in_process',
    'run_memory_worker',
    'status',
    'steady_seconds',
    'synchronize',
    'time_call',
    'verdict',
    'write_json',
]
