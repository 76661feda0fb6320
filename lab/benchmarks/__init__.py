"""The benchmarks' device-aware core: timing by CUDA events or the wall
clock, peak memory, FLOP counts, a grid runner, tables, verdicts and plots.
Each tool under ``tools/analysis/benchmark_*.py`` only describes its cases.
"""

from . import plots
from .flops import CPU_SDPA_FLOPS, FlopCountedStep, count_flops
from .grid import run_grid
from .memory import (
    cuda_peak_growth_mib,
    memory_table,
    peak_growth_mib,
    run_memory_worker,
    worker_memory_table,
)
from .options import (
    DTYPES,
    add_counted_step_arguments,
    add_device_arguments,
    add_memory_worker_argument,
    add_operator_argument,
    add_out_dir_argument,
    add_timing_arguments,
    autocast,
    check_device_arguments,
    cuda_unavailable_reason,
    describe_device,
    operators_or_all,
    resolve_counted_step,
)
from .process import run_case, run_in_child, run_in_process
from .report import (
    column_table,
    compare,
    flop_ceiling_verdict,
    gflop_text,
    growth_lines,
    linear_fit_error,
    markdown_table,
    nested_set,
    ratio,
    ratio_rows,
    status,
    verdict,
    write_json,
    write_table,
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
    'add_counted_step_arguments',
    'add_device_arguments',
    'add_memory_worker_argument',
    'add_operator_argument',
    'add_out_dir_argument',
    'add_timing_arguments',
    'autocast',
    'check_device_arguments',
    'column_table',
    'compare',
    'count_flops',
    'cuda_peak_growth_mib',
    'cuda_unavailable_reason',
    'describe_device',
    'first_call_seconds',
    'flop_ceiling_verdict',
    'gflop_text',
    'growth_lines',
    'interleaved_times',
    'linear_fit_error',
    'markdown_table',
    'measure_step',
    'memory_table',
    'nested_set',
    'operators_or_all',
    'peak_growth_mib',
    'peak_resident_growth_mib',
    'plots',
    'ratio',
    'ratio_rows',
    'reset_peak_resident',
    'resident_kib',
    'resolve_counted_step',
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
    'worker_memory_table',
    'write_json',
    'write_table',
]
