"""The fla backend of mmlvit.ops.gla: backend choice and checks, its
plumbing through a stand-in for chunk_gla on CPU, and fla's kernels on CUDA
where there is a GPU."""

import builtins

import pytest
import torch
from fla.ops.gla.naive import naive_recurrent_gla
from gla_inputs import inputs

import mmlvit.ops.gla.dispatch as dispatch
import mmlvit.ops.gla.fla_backend as fla_backend
from mmlvit.ops import bidirectional_gla
from mmlvit.ops.gla import BACKENDS, check_backend

# ----------------------------------------------------- backend choice


def test_check_backend_accepts_the_backends_and_names_them():
    for backend in BACKENDS:
        check_backend(backend)
    with pytest.raises(ValueError, match="Unknown GLA backend 'triton'"):
        check_backend('triton')


def test_fla_backend_on_cpu_raises_clearly():
    q, k, v, g = inputs()
    with pytest.raises(RuntimeError, match="backend='fla'.*need CUDA"):
        bidirectional_gla(q, k, v, g, g, backend='fla')


def test_auto_backend_picks_fla_only_on_cuda(monkeypatch):
    resolve = dispatch.resolve_backend
    monkeypatch.setattr(dispatch, 'fla_importable', lambda: True)
    assert resolve('auto', torch.device('cpu')) == 'torch'
    assert resolve('auto', torch.device('cuda')) == 'fla'
    assert resolve('fla', torch.device('cuda')) == 'fla'
    assert resolve('torch', torch.device('cuda')) == 'torch'
    monkeypatch.setattr(dispatch, 'fla_importable', lambda: False)
    assert resolve('auto', torch.device('cuda')) == 'torch'


def test_auto_backend_on_cpu_never_calls_fla(monkeypatch):
    def fail(*args):
        raise AssertionError('fla path taken on CPU')

    monkeypatch.setattr(dispatch, 'bidirectional_fla', fail)
    q, k, v, g = inputs(T=9)
    bidirectional_gla(q, k, v, g, g)  # backend='auto'


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


# ------------------------------------------- fla plumbing (stand-in)


class FakeChunkGLA:
    """Stands in for fla.ops.gla.chunk_gla on CPU: checks the arguments
    fla requires and computes with fla's naive recurrent reference."""

    def __init__(self):
        self.calls = []

    def __call__(self, q, k, v, g, scale=None, initial_state=None, **kw):
        self.calls.append(dict(q=q, k=k, v=v, g=g, scale=scale, kw=kw))
        assert initial_state is None  # fla's zero state, fp32 in-kernel
        assert q.shape == k.shape == g.shape and v.shape[:3] == q.shape[:3]
        assert g.dtype == torch.float32
        d = q.shape[-1]
        o, _ = naive_recurrent_gla(q * (scale * d**0.5), k, v, g)
        return o, None


def test_fla_plumbing_layout_flip_and_batch_concat(monkeypatch):
    fake = FakeChunkGLA()
    monkeypatch.setattr(fla_backend, 'fla_chunk_gla', lambda: fake)
    B, H, T, d = 2, 3, 21, 4
    q, k, v, g_fwd, g_bwd = inputs(B, H, T, d, dtype=torch.float32, gate=2)
    tensors = [t.requires_grad_() for t in (q, k, v, g_fwd, g_bwd)]
    out = fla_backend.bidirectional_fla(*tensors, scale=0.4)

    (call,) = fake.calls
    assert call['scale'] == 0.4 and not call['kw']
    # fla's layout (2B, T, H, d): forward sequences, then reversed ones.
    for name, fwd, bwd in [
        ('q', q, q),
        ('k', k, k),
        ('v', v, v),
        ('g', g_fwd, g_bwd),
    ]:
        assert call[name].shape == (2 * B, T, H, d)
        torch.testing.assert_close(call[name][:B], fwd.transpose(1, 2))
        torch.testing.assert_close(call[name][B:], bwd.flip(2).transpose(1, 2))

    # Same function and same gradients as the PyTorch path.
    ref = bidirectional_gla(*tensors, scale=0.4, backend='torch')
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    fla_grads = torch.autograd.grad(out, tensors, grad)
    torch_grads = torch.autograd.grad(ref, tensors, grad)
    for a, b in zip(fla_grads, torch_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_fla_plumbing_keeps_low_precision_inputs(monkeypatch):
    fake = FakeChunkGLA()
    monkeypatch.setattr(fla_backend, 'fla_chunk_gla', lambda: fake)
    q, k, v, g_fwd, g_bwd = inputs(T=10, dtype=torch.float32, gate=2)
    low = [t.bfloat16() for t in (q, k, v)]
    out = fla_backend.bidirectional_fla(*low, g_fwd.bfloat16(), g_bwd, 0.5)
    (call,) = fake.calls
    assert call['q'].dtype == call['v'].dtype == torch.bfloat16
    assert call['g'].dtype == torch.float32
    assert out.dtype == torch.bfloat16


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
