"""Launch options the fused kernels could take instead of the shipped ones,
one module constant each, to time side by side on a GPU
(``tools/analysis/launch_variants.py``).

The shipped options were chosen without a GPU, by what the compiled code
runs (instructions, registers, resident programs:
``tools/analysis/kernel_resources.py``; docs/benchmarks.md, "Kernel
resources without a GPU"). Each :class:`Variant` sets constants back to
the other choice while it is active. The launch code reads them at every
call, so a variant takes effect at the next call (whose kernels compile
then, once).
"""

import contextlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

GLA = ('GatedLinearAttention',)
TTT = ('TTTAttention',)
# The operators whose streaming loops take num_stages from their grid
# (ELU and InLine run ReLU's kernels).
STREAMING = ('ReLULinearAttention', 'MHLAttention', *TTT, *GLA)


@dataclass(frozen=True)
class Patch:
    """Set ``module.name`` to ``value(old value)``."""

    module: str
    name: str
    value: Callable


@dataclass(frozen=True)
class Variant:
    """Another choice of launch options: ``name`` (its command-line name),
    ``what`` it changes, the ``operators`` it changes and its
    ``patches``."""

    name: str
    what: str
    operators: tuple[str, ...]
    patches: tuple[Patch, ...]

    @contextlib.contextmanager
    def applied(self):
        """The patches while active, the shipped values after (also on an
        error). A patch naming a constant that does not exist raises
        AttributeError instead of setting a new, unread one."""
        done = []
        try:
            for patch in self.patches:
                module = importlib.import_module(patch.module)
                if not hasattr(module, patch.name):
                    raise AttributeError(
                        f'launch variant {self.name!r}: {patch.module} has '
                        f'no {patch.name}; if it was renamed, rename it in '
                        'lab/benchmarks/launch_variants.py'
                    )
                old = getattr(module, patch.name)
                setattr(module, patch.name, patch.value(old))
                done.append((module, patch.name, old))
            yield self
        finally:
            for module, name, old in reversed(done):
                setattr(module, name, old)


def _whole_chunks_at(warps):
    """GLA's LAUNCH with its whole-chunk kernels at ``warps`` warps."""

    def value(launch):
        kinds = ('whole_forward', 'whole_backward')
        return dict(
            launch, **{k: dict(launch[k], num_warps=warps) for k in kinds}
        )

    return value


def _state_scan_at(warps):
    """GLA's LAUNCH with its state scan at ``warps`` warps."""

    def value(launch):
        return dict(launch, states=dict(launch['states'], num_warps=warps))

    return value


def _constant(value):
    return lambda old: value


# GLA's first (its targets are the furthest off), then those of several
# operators, then TTT's: the order the tool runs them in.
VARIANTS = (
    Variant(
        'gla-whole-8-warps',
        "GLA's whole-chunk output, dq, dk and dv at 8 warps (one program a "
        'multiprocessor) instead of 4 on sm_90',
        GLA,
        (
            Patch(
                'mmlvit.ops.gla.triton_function', 'LAUNCH', _whole_chunks_at(8)
            ),
        ),
    ),
    Variant(
        'gla-scan-4-warps',
        "GLA's state scan at 4 warps instead of 8: 13 % fewer warp "
        'instructions an iteration, 20 resident warps instead of 32 (sm_90, '
        'bf16)',
        GLA,
        (
            Patch(
                'mmlvit.ops.gla.triton_function', 'LAUNCH', _state_scan_at(4)
            ),
        ),
    ),
    Variant(
        'gla-gate-grad-8-warps',
        "GLA's log-gate gradient at 8 warps instead of 4 on sm_90",
        GLA,
        (Patch('mmlvit.ops.gla.gates', 'GRAD_WARPS_SM90', _constant(8)),),
    ),
    Variant(
        'gla-gate-grads-fp32-products',
        "GLA's log-gate and gate-feature gradients multiplying as fp32 "
        'multiply-adds instead of three tf32 tensor-core products',
        GLA,
        (
            Patch(
                'mmlvit.ops.gla.gates',
                'GRAD_PRECISION_SM90',
                _constant('ieee'),
            ),
            Patch(
                'mmlvit.ops.gla.gates',
                'FEATURE_GRAD_PRECISION',
                _constant('ieee'),
            ),
        ),
    ),
    Variant(
        'gla-log-gates-uncapped',
        "GLA's log-gate kernel without its cap of 64 registers a thread",
        GLA,
        (Patch('mmlvit.ops.gla.gates', 'LOG_GATE_OPTIONS', _constant({})),),
    ),
    Variant(
        'three-stage-loops',
        "every streaming loop copies two tiles ahead (Triton's default of "
        'three stages), whatever its grid',
        STREAMING,
        (
            Patch(
                'mmlvit.ops.common.triton_runtime',
                'MANY_PROGRAMS',
                _constant(sys.maxsize),
            ),
        ),
    ),
    Variant(
        'ttt-query-grad-8-warps',
        "TTT's query gradient with half-precision tokens at 8 warps instead "
        'of 4 on sm_90',
        TTT,
        (
            Patch(
                'mmlvit.ops.ttt.swiglu_function',
                'QUERY_GRAD_HALF_WARPS_SM90',
                _constant(8),
            ),
        ),
    ),
)
BY_NAME = {variant.name: variant for variant in VARIANTS}
