"""fla's Triton GLA kernels on CPU tensors, under Triton's interpreter.

Run as a script (test_gla_fla.py does, in a fresh process: TRITON_INTERPRET
must be set before triton is imported, and the rest of the suite imports
it normally). Prints one JSON line: for each check, the largest absolute
difference from the reference, the reference's largest magnitude and the
dtypes seen.

- ``chunk_gla``: fla-core's ``chunk_gla`` against its naive recurrence
  (``fla.ops.gla.naive.naive_recurrent_gla``), output and gradients.
- ``bidirectional``: the fla path of ``bidirectional_gla``
  (``mmlvit.ops.gla.bidirectional_fla``) against the PyTorch
  path, output and gradients, in fp32 and from bf16/fp16 inputs.
- ``compiled``: a function around the fla path through ``torch.compile``
  (inductor) against the same function in eager mode, output and
  gradients, and the reasons of Dynamo's graph breaks.
"""

import ast
import json
import time
import warnings

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
from triton.runtime import interpreter
from triton.runtime.autotuner import Autotuner


class _LoopVariablesAsTensors(interpreter.ASTTransformer):
    """The interpreter rewrites every assignment in a kernel's source so
    that the assigned value becomes a tl.tensor, but leaves the variable of
    ``for i in range(n)`` a Python int, and fla calls ``i.to(tl.int64)`` on
    it (``chunk_fwd_kernel_h``). Assigning the variable to itself at the
    top of the loop body gives the interpreter an assignment to rewrite."""

    def visit_For(self, node):
        if isinstance(node.target, ast.Name):
            name = node.target.id
            itself = ast.Assign(
                targets=[ast.Name(name, ast.Store())],
                value=ast.Name(name, ast.Load()),
            )
            node.body.insert(0, itself)
        return self.generic_visit(node)


_prune_configs = Autotuner.prune_configs


def _first_config(self, kwargs):
    """Triton's autotuner times every config that survives pruning with a
    GPU timer, which the interpreter lacks ('0 active drivers'); with one
    config left it takes it untimed."""
    return _prune_configs(self, kwargs)[:1]


interpreter.FunctionRewriter.ast_transformer = _LoopVariablesAsTensors()
Autotuner.prune_configs = _first_config

from fla.ops.gla import chunk_gla  # noqa: E402
from fla.ops.gla.naive import naive_recurrent_gla  # noqa: E402
from gla_inputs import grads, inputs  # noqa: E402

import mmlvit.ops.gla as fla_backend  # noqa: E402
from mmlvit.ops.gla import bidirectional_gla  # noqa: E402

DTYPES = {'fp32': torch.float32, 'fp16': torch.float16}


def compare(fn, reference, tensors, names):
    """Output and gradients of ``fn`` against ``reference``."""
    out, ref = fn(*tensors), reference(*tensors)
    report = dict(
        dtype=str(out.dtype),
        out=(out.double() - ref.double()).abs().max().item(),
        out_scale=ref.abs().max().item(),
        grads={},
        grad_scales={},
        grad_dtypes={},
    )
    for name, a, b in zip(
        names, grads(fn, tensors), grads(reference, tensors)
    ):
        report['grads'][name] = (a.double() - b.double()).abs().max().item()
        report['grad_scales'][name] = b.abs().max().item()
        report['grad_dtypes'][name] = str(a.dtype)
    return report


def check_chunk_gla(T):
    """fla's chunk_gla against fla's naive recurrence, (B, T, H, d)."""
    tensors = [
        t.transpose(1, 2).contiguous()
        for t in inputs(B=1, H=2, T=T, d=16, dtype=torch.float32, seed=T)
    ]
    return compare(
        lambda *a: chunk_gla(*a)[0],
        lambda *a: naive_recurrent_gla(*a)[0],
        tensors,
        'q k v g'.split(),
    )


def check_bidirectional(T, dtype):
    """The fla path against the PyTorch path, q, k, v and g_fwd in
    ``dtype`` (g_bwd stays fp32), and the dtypes chunk_gla received."""
    seen = {}
    kernel = fla_backend.fla_chunk_gla()

    def recording(q, k, v, g, **kwargs):
        seen.update(q=str(q.dtype), v=str(v.dtype), g=str(g.dtype))
        return kernel(q, k, v, g, **kwargs)

    fla_backend.fla_chunk_gla = lambda: recording
    q, k, v, g_fwd, g_bwd = inputs(
        B=2, H=2, T=T, d=16, dtype=torch.float32, seed=T, gate=2
    )
    low = [t.to(DTYPES[dtype]) for t in (q, k, v, g_fwd)]
    report = compare(
        lambda *a: fla_backend.bidirectional_fla(*a, scale=0.4),
        lambda *a: bidirectional_gla(*a, scale=0.4, backend='torch'),
        [*low, g_bwd],
        'q k v g_fwd g_bwd'.split(),
    )
    fla_backend.fla_chunk_gla = lambda: kernel
    return dict(report, kernel_dtypes=seen)


def check_compiled(T):
    """The fla path inside a function compiled by ``torch.compile``
    against the same function run eagerly, and Dynamo's graph breaks."""

    def around(q, k, v, g_fwd, g_bwd):
        out = fla_backend.bidirectional_fla(q * 2, k, v, g_fwd, g_bwd, 0.4)
        return out.tanh() + v

    tensors = inputs(B=1, H=2, T=T, d=16, dtype=torch.float32, seed=T, gate=2)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        report = compare(
            torch.compile(around), around, tensors, 'q k v g_fwd g_bwd'.split()
        )
    breaks = torch._dynamo.utils.counters['graph_break']
    dynamo_warnings = [
        str(w.message) for w in caught if 'Dynamo' in str(w.message)
    ]
    return dict(report, breaks=sorted(breaks), dynamo_warnings=dynamo_warnings)


def main():
    torch.set_num_threads(1)
    results, seconds = {}, {}
    checks = [
        ('chunk_gla T=50', check_chunk_gla, (50,)),
        ('chunk_gla T=80', check_chunk_gla, (80,)),
        ('bidirectional fp32 T=50', check_bidirectional, (50, 'fp32')),
        ('bidirectional fp32 T=80', check_bidirectional, (80, 'fp32')),
        ('bidirectional fp16 T=50', check_bidirectional, (50, 'fp16')),
        ('compiled fp32 T=50', check_compiled, (50,)),
    ]
    for name, check, args in checks:
        start = time.perf_counter()
        results[name] = check(*args)
        seconds[name] = round(time.perf_counter() - start, 2)
    print(json.dumps(dict(results=results, seconds=seconds)))


if __name__ == '__main__':
    main()
