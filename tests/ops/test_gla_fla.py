"""The fla backend of mmlvit.ops.gla: backend choice and checks, fla's real
Triton kernels on CPU under Triton's interpreter (fla_interpreter.py, in a
subprocess), and on CUDA where there is a GPU."""

import builtins

import interpreter_run
import pytest
import torch
from gla_inputs import inputs

import mmlvit.ops.gla as dispatch
import mmlvit.ops.gla as fla_backend
from mmlvit.ops import bidirectional_gla
from mmlvit.ops.gla import BACKENDS, check_backend

# ----------------------------------------------------- backend choice


def test_check_backend_accepts_the_backends_and_names_them():
    for backend in BACKENDS:
        check_backend(backend)
    with pytest.raises(ValueError, match="Unknown GLA backend 'cuda'"):
        check_backend('cuda')


def test_fla_backend_on_cpu_raises_clearly():
    q, k, v, g = inputs()
    with pytest.raises(RuntimeError, match="backend='fla'.*need CUDA"):
        bidirectional_gla(q, k, v, g, g, backend='fla')


def test_auto_backend_never_picks_fla(monkeypatch):
    """'auto' picks our Triton kernels on CUDA (test_gla_triton.py); fla
    only runs when asked for by name."""
    resolve = dispatch.resolve_backend
    monkeypatch.setattr(dispatch, 'triton_importable', lambda: True)
    assert resolve('auto', torch.device('cpu')) == 'torch'
    assert resolve('auto', torch.device('cuda')) == 'triton'
    assert resolve('fla', torch.device('cuda')) == 'fla'
    assert resolve('torch', torch.device('cuda')) == 'torch'
    monkeypatch.setattr(dispatch, 'triton_importable', lambda: False)
    assert resolve('auto', torch.device('cuda')) == 'torch'


def test_missing_fla_raises_import_error(monkeypatch):
    real_import = builtins.__import__

    def no_fla(name, *args, **kwargs):
        if name == 'fla' or name.startswith('fla.'):
            raise ImportError('No module named fla')
        return real_import(name, *args, **kwargs)

    caches = (fla_backend.fla_chunk_gla, fla_backend.fla_importable)
    monkeypatch.setattr(builtins, '__import__', no_fla)
    for cached in caches:
        cached.cache_clear()
    try:
        with pytest.raises(ImportError, match='fla-core'):
            fla_backend.fla_chunk_gla()
        assert not fla_backend.fla_importable()
    finally:
        for cached in caches:
            cached.cache_clear()


# ------------------------------------ fla's kernels under the interpreter


# The results of fla_interpreter.py, by case.
interpreted = interpreter_run.report_fixture(
    'fla_interpreter.py', timeout=600, entry='results'
)


@pytest.mark.parametrize('T', [50, 80])
def test_chunk_gla_equals_fla_naive_recurrence(interpreted, T):
    """fla's chunk_gla (chunks of 64: T = 50 is one partial chunk, 80 a
    whole one and a partial one) against fla's token-by-token reference,
    output and gradients of q, k, v, g."""
    report = interpreted[f'chunk_gla T={T}']
    assert report['dtype'] == 'torch.float32'
    interpreter_run.assert_close(report, rtol=2e-5)


@pytest.mark.parametrize('T', [50, 80])
def test_fla_path_equals_torch_path(interpreted, T):
    """The fla path (both directions in one chunk_gla call, the reversed
    sequences stacked along the batch) against the PyTorch path: output
    and the gradients of q, k, v, g_fwd, g_bwd."""
    report = interpreted[f'bidirectional fp32 T={T}']
    assert report['dtype'] == 'torch.float32'
    assert set(report['grads']) == {'q', 'k', 'v', 'g_fwd', 'g_bwd'}
    interpreter_run.assert_close(report, rtol=2e-5)


def test_fla_path_from_fp16_inputs(interpreted):
    """fp16 q, k, v and g_fwd (g_bwd fp32): chunk_gla gets q, k, v in fp16
    and the gates in fp32; the output and every gradient keep their input's
    dtype and match the PyTorch path to fp16's precision. (bf16 is left
    out: the interpreter holds bf16 as uint16 bit patterns and computes on
    them as integers.)"""
    report = interpreted['bidirectional fp16 T=50']
    assert report['kernel_dtypes'] == dict(
        q='torch.float16', v='torch.float16', g='torch.float32'
    )
    assert report['dtype'] == 'torch.float16'
    assert report['grad_dtypes'] == dict(
        q='torch.float16',
        k='torch.float16',
        v='torch.float16',
        g_fwd='torch.float16',
        g_bwd='torch.float32',
    )
    interpreter_run.assert_close(report, rtol=3e-3)


def test_fla_path_under_torch_compile(interpreted):
    """torch.compile calls the fla path eagerly (one graph break, at the
    entry point: Dynamo neither traces fla's launch code nor warns about
    its cached import) and the rest of the function compiles: output and
    every gradient equal the eager function's."""
    report = interpreted['compiled fp32 T=50']
    assert len(report['breaks']) == 1, report['breaks']
    assert '<function bidirectional_fla' in report['breaks'][0]
    assert report['dynamo_warnings'] == []
    interpreter_run.assert_close(report, rtol=1e-6)


# --------------------------------------------------------- CUDA only
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason='fla kernels need CUDA'
)
@pytest.mark.parametrize('T', [197, 785])
def test_fla_path_equals_torch_path_on_cuda(T):
    q, k, v, g_fwd, g_bwd = (
        t.cuda()
        for t in inputs(B=2, H=3, T=T, d=64, dtype=torch.float32, gate=2)
    )
    g_fwd, g_bwd = g_fwd / 16, g_bwd / 16  # the module's temperature
    tensors = [t.requires_grad_() for t in (q, k, v, g_fwd, g_bwd)]
    out_fla = bidirectional_gla(*tensors, backend='fla')
    out_torch = bidirectional_gla(*tensors, backend='torch')
    # fla's kernels use TF32 matrix products.
    tol = dict(rtol=2e-2, atol=2e-2 * out_torch.abs().max().item())
    torch.testing.assert_close(out_fla, out_torch, **tol)
    grad = torch.randn_like(out_torch)
    fla_grads = torch.autograd.grad(out_fla, tensors, grad)
    torch_grads = torch.autograd.grad(out_torch, tensors, grad)
    for name, a, b in zip('q k v g_fwd g_bwd'.split(), fla_grads, torch_grads):
        torch.testing.assert_close(
            a, b, rtol=2e-2, atol=2e-2 * b.abs().max().item(), msg=name
        )
