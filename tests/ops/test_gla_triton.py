"""The triton backend of mmlvit.ops.gla (our fused bidirectional kernels):
backend choice, the kernels on CPU under Triton's interpreter against a
float64 oracle (gla_triton_interpreter.py, in a subprocess), and at real
sizes on CUDA against the PyTorch path."""

from types import SimpleNamespace

import interpreter_run
import pytest
import torch
from gla_inputs import inputs

import mmlvit.ops.gla as dispatch
from mmlvit.ops import bidirectional_gla
from mmlvit.ops.gla import log_gates
from mmlvit.ops.gla import triton_function as triton_backend
from mmlvit.ops.gla.gates import within_chunks

# ----------------------------------------------------- backend choice


def test_triton_backend_on_cpu_raises_clearly():
    q, k, v, g = inputs(T=9)
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        bidirectional_gla(q, k, v, g, g, backend='triton')


def test_auto_picks_triton_on_cuda_where_the_kernels_apply(monkeypatch):
    resolve = dispatch.resolve_backend
    monkeypatch.setattr(dispatch, 'triton_importable', lambda: True)
    cuda = torch.device('cuda')
    assert resolve('auto', cuda) == 'triton'
    assert resolve('auto', cuda, supported=False) == 'torch'
    assert resolve('auto', torch.device('cpu')) == 'torch'
    assert resolve('triton', cuda) == 'triton'


@pytest.mark.parametrize(
    'batch, tokens, programs, stages',
    [(128, 197, 6144, 1), (2, 16385, 96, 3)],  # 224 px; 2048 px
)
def test_state_scan_copies_ahead_only_in_small_grids(
    monkeypatch, batch, tokens, programs, stages
):
    """ViT-B's state scan (2 key blocks, 2 directions, 12 heads) at 224
    px, batch 128 copies nothing ahead; at 2048 px, batch 2 its 96
    programs (fewer than a GPU's multiprocessors) do (Triton's default)."""
    pytest.importorskip('triton')
    from mmlvit.ops.gla import triton_forward as triton_kernels
    from mmlvit.ops.gla import triton_function as triton_backend

    launches = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **options: launches.append((grid, options))

    monkeypatch.setattr(triton_kernels, 'chunk_states_kernel', Recorder())
    x = torch.empty(batch, 12, tokens, 64, dtype=torch.bfloat16, device='meta')
    g = torch.empty(batch, 12, tokens, 64, device='meta')
    dtypes = triton_backend._dtypes(x.dtype)
    triton_backend.chunk_states(x, x, g, g, False, dtypes)
    ((grid, options),) = launches
    assert grid[0] * grid[1] * grid[2] == programs
    assert options['num_stages'] == stages and options['num_warps'] == 8


def test_unsupported_inputs_are_named():
    reason = dispatch.unsupported_reason
    q = torch.empty(1, 1, 4, 64)
    assert reason(q, q) is None
    assert reason(q.half(), q.bfloat16()) is None
    assert 'up to 64' in reason(torch.empty(1, 1, 4, 80), q)  # ViT-H's 80
    assert 'float64' in reason(q.double(), q)


def test_unsupported_on_a_gpu_short_of_shared_memory(monkeypatch):
    """With 99 KiB of shared memory a program (sm_86 / sm_89) the kernels
    take bf16 tokens only ('auto' then picks the PyTorch path for
    others); with less, none."""
    import mmlvit.ops.common.triton_runtime as runtime

    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 99 * 1024
    )
    cuda = torch.device('cuda')

    def tokens(dtype):
        return SimpleNamespace(device=cuda, dtype=dtype, shape=(1, 1, 4, 64))

    bf16 = tokens(torch.bfloat16)
    assert dispatch.unsupported_reason(bf16, bf16) is None
    reason = dispatch.unsupported_reason(tokens(torch.float16), bf16)
    assert 'bf16 tokens only' in reason and '99 KiB' in reason
    assert dispatch.resolve_backend('auto', cuda, reason is None) == 'torch'
    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 64 * 1024
    )
    assert 'at least 99 KiB' in dispatch.unsupported_reason(bf16, bf16)


# ------------------------------------ the kernels under the interpreter


# The results of gla_triton_interpreter.py, by case.
interpreted = interpreter_run.report_fixture(
    'gla_triton_interpreter.py', timeout=900, entry='results'
)


def assert_close(report, rtol):
    """Finite, with the gradients of q, k, v and both gates, each within
    ``rtol`` of the oracle's largest magnitude as the output is."""
    assert report['finite'], report
    assert set(report['grads']) == {'q', 'k', 'v', 'g_fwd', 'g_bwd'}
    interpreter_run.assert_close(report, rtol)


def test_fp32_output_and_gradients_equal_oracle(interpreted):
    """T = 150: three chunks of 64, the last one partial, so the middle
    chunk receives a state from each side; d = 16, three heads."""
    report = interpreted['strided fp32 T=150']
    assert report['dtype'] == 'torch.float32'
    assert_close(report, rtol=2e-5)


def test_heads_of_64_equal_oracle(interpreted):
    """d = 64, ViT-B's heads: the state scans split the key channels into
    two blocks (each with every value channel), the other launches take
    the whole width."""
    assert_close(interpreted['wide fp32 T=80'], rtol=2e-5)


def test_strided_views_reach_the_kernels_uncopied(interpreted):
    """q, k, v as the module makes them, views of one (B, N, 3, H, d)
    projection: the kernels get their strides, no contiguous copy."""
    for name in ('strided fp32 T=150', 'strided bf16 T=80'):
        report = interpreted[name]
        strides = report['view_strides']
        assert strides[-2] == 3 * 3 * 16  # 3 H d between tokens
        for t in 'qkv':
            assert report['kernel'][t] == strides, name


def test_qkv_gradients_share_one_buffer(interpreted):
    """Equal head widths: dq, dk, dv are slots of one (B, N, 3, H, d)
    buffer, the gradient of the qkv projection as it is (no stack); d_k
    = 24 with d_v = 16 cannot share one."""
    for name in ('strided fp32 T=150', 'strided bf16 T=80'):
        assert interpreted[name]['kernel']['qkv_grad_buffer'], name
    assert not interpreted['vanishing fp32 T=80']['kernel']['qkv_grad_buffer']


def test_backward_takes_chunks_of_every_kind(interpreted):
    """Chunks of 64 tokens whose gates sum to >= -60 (every channel, both
    directions) are taken whole, by (64, 64) products (kind 2); the others
    by 16-token sub-blocks, whose diagonals are factored where each
    sub-block's gates sum to >= -30 (1) and exact otherwise (0). The
    strided checks' three heads (gates / 2.2, / 1.7, as drawn) and the
    vanishing gates take all three, so the comparisons above cover each;
    the forward decides alike whether a chunk is taken whole. Head 0's
    full chunks have gate sums of -51 to -57: their keys' factors reach
    e^57, and with the sub-blocks' limit (-30) they would not be taken
    whole."""
    expected = {
        'strided fp32 T=150': [2, 2, 2, 1, 1, 2, 0, 0, 2],  # (head, chunk)
        'strided bf16 T=80': [2, 2, 1, 2, 0, 2],
        'strided fp16 T=80': [2, 2, 1, 2, 0, 2],
        'vanishing fp32 T=80': [0, 0],
        'widths fp32 T=150': [2, 2, 2, 1, 1, 2],
    }
    for name, kinds in expected.items():
        seen = interpreted[name]['kernel']
        assert seen['kinds'] == kinds, name
        # The forward takes the same chunks whole (one value tile) ...
        assert seen['whole'] == [int(kind == 2) for kind in kinds], name
        # ... exactly those whose gates sum to >= -60,
        whole = [int(total >= -60) for total in seen['chunk_sums']]
        assert whole == [int(kind == 2) for kind in kinds], name
    # Among them, chunks whose gates sum below the sub-blocks' -30.
    for name in (
        'strided fp32 T=150',
        'strided bf16 T=80',
        'widths fp32 T=150',
    ):
        seen = interpreted[name]['kernel']
        strong = [
            kind
            for kind, total in zip(seen['kinds'], seen['chunk_sums'])
            if total < -30
        ]
        assert 2 in strong, name


def test_vanishing_gates_stay_finite_and_exact(interpreted):
    """Log-gates of -30 and -60 in places (decays of e^-30 per token and
    far below fp32's range across several), d_k = 24 (not a power of
    two), d_v = 16. Decays inside a chunk are differences of its partial
    gate sums, so after a -60 gate they carry fp32 rounding of about
    1e-7 * 60 (as any cumulative-sum form): a looser tolerance."""
    assert_close(interpreted['vanishing fp32 T=80'], rtol=5e-5)


def test_unequal_head_widths_in_the_factored_kernels(interpreted):
    """d_k = 24 (not a power of two) and d_v = 16: masked tiles in the
    whole-chunk kernels and the factored diagonals (the vanishing gates
    test them in the exact ones), fp32."""
    assert_close(interpreted['widths fp32 T=150'], rtol=2e-5)


def test_gates_function_without_chunk_keyword(interpreted):
    """``bidirectional_gla_gated`` on the triton backend with a gates
    function that does not take ``chunk`` (the kernels' Function sums its
    log-gates within chunks itself): output and the gradients of q, k, v
    and of both logit tensors the gates come from, fp32."""
    report = interpreted['plain gates fp32 T=80']
    assert report['finite'], report
    assert set(report['grads']) == {'q', 'k', 'v', 'logits_fwd', 'logits_bwd'}
    interpreter_run.assert_close(report, rtol=2e-5)


def test_chunked_passes_functions_that_sum_within_chunks():
    """:func:`~mmlvit.ops.gla.triton_function.chunked`: a function taking
    ``chunk`` (or any keyword) is called as it is; one that does not has
    its gates summed within chunks, as ``within_chunks`` sums them."""
    g_fwd, g_bwd = inputs(B=1, H=2, T=70, d=4, gate=2)[3:]
    for takes_chunk in (log_gates, lambda *a, **kw: a):
        assert triton_backend.chunked(takes_chunk) is takes_chunk
    summed = triton_backend.chunked(lambda a, b: (a, b))
    want = within_chunks(g_fwd, g_bwd, 64)
    for got, ref in zip(summed(g_fwd, g_bwd, chunk=64), want):
        torch.testing.assert_close(got, ref)


@pytest.mark.parametrize('dtype, rtol', [('bf16', 2e-2), ('fp16', 3e-3)])
def test_half_inputs_keep_dtype_and_match_oracle(interpreted, dtype, rtol):
    """bf16 / fp16 q, k, v (fp32 gates), T = 80 (two chunks): output,
    q, k, v gradients and the chunk states in the input dtype, gate
    gradients in fp32, within
    the input precision of the float64 oracle of the same rounded
    inputs."""
    report = interpreted[f'strided {dtype} T=80']
    name = {'bf16': 'torch.bfloat16', 'fp16': 'torch.float16'}[dtype]
    assert report['dtype'] == report['kernel']['dtype'] == name
    assert report['kernel']['gate_dtype'] == 'torch.float32'
    # Two forwards' states (the output's, the gradients' run), then the
    # backward's states and their gradients, stored as the products read
    # them: rounded to the inputs' dtype.
    assert report['kernel']['states_dtypes'] == [name] * 4
    assert report['grad_dtypes'] == dict(
        q=name, k=name, v=name, g_fwd='torch.float32', g_bwd='torch.float32'
    )
    assert_close(report, rtol=rtol)


def test_module_on_triton_equals_float64_torch_path(interpreted):
    """GatedLinearAttention with backend='triton' (gates recomputed from
    the tokens and the gate weights inside the kernels' Function) against
    the float64 torch path: output and the gradient of x and of every
    parameter, the gate projections' included."""
    report = interpreted['module fp32 T=50']
    names = {'x', 'qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias'}
    names |= {'gate_down.weight', 'gate_up.weight', 'gate_up.bias'}
    names |= {'g_proj.weight', 'g_norm.weight'}
    assert set(report['grads']) == names
    interpreter_run.assert_close(report, rtol=2e-5)


def test_module_keeps_only_half_precision_activations(interpreted):
    """Under bf16 autocast the module keeps no fp32 activation for
    backward: no gates (two fp32 (B, H, N, d) tensors), no fp32 copy of
    its input; what is fp32 is a parameter."""
    saved = interpreted['module fp32 T=50']['saved']
    activations = [t for t in saved if not t['parameter']]
    assert activations
    assert {t['dtype'] for t in activations} == {'torch.bfloat16'}, saved
    assert [t['shape'] for t in saved if t['parameter']] == [
        [16, 32],  # gate_down.weight
        [64, 16],  # gate_up.weight
        [64],  # gate_up.bias
    ]


# --------------------------------------------------------- CUDA only


def _cuda_inputs(T, dtype, B=2, H=12, d=64, temperature=16):
    """A (B, T, 3, H, d) projection's q, k, v views in ``dtype`` and gates
    as the module makes them (logsigmoid / temperature), fp32."""
    q, k, v, g_fwd, g_bwd = inputs(
        B=B, H=H, T=T, d=d, dtype=torch.float32, seed=T, gate=2
    )
    qkv = torch.stack([q, k, v], dim=2).permute(0, 3, 2, 1, 4).cuda()
    q, k, v = qkv.to(dtype).permute(2, 0, 3, 1, 4)
    gates = (g.cuda() / temperature for g in (g_fwd, g_bwd))
    return [q, k, v, *gates]


@pytest.mark.cuda
def test_auto_picks_triton_on_cuda():
    q = torch.empty(1, 1, 4, 64, device='cuda')
    assert dispatch.resolve_backend('auto', q.device) == 'triton'


@pytest.mark.cuda
@pytest.mark.parametrize(
    'T, temperature', [(785, 16), (4097, 16), (785, 2), (785, 1.5)]
)
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
def test_triton_equals_torch_path_on_cuda(T, temperature, dtype):
    """B = 2, H = 12, d = 64 views of one projection: output and all five
    gradients against the PyTorch path run in fp32 on the same (rounded)
    inputs. The kernels multiply in the input dtype (TF32 for fp32). At a
    gate temperature of 16 chunks are taken whole; at 2 (64-token gate
    sums near -57) whole where they sum to >= -60 (keys' factors near
    e^60), by sub-blocks elsewhere; at 1.5 (near -75) by sub-blocks."""
    tensors = _cuda_inputs(T, dtype, temperature=temperature)
    tensors = [t.requires_grad_() for t in tensors]
    exact = [t.detach().float().requires_grad_() for t in tensors]
    out = bidirectional_gla(*tensors, backend='triton')
    ref = bidirectional_gla(*exact, backend='torch')
    assert out.dtype == dtype
    rtol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    torch.testing.assert_close(
        out.float(), ref, rtol=rtol, atol=rtol * ref.abs().max().item()
    )
    w = torch.randn_like(ref)
    got = torch.autograd.grad(out, tensors, w.to(dtype))
    want = torch.autograd.grad(ref, exact, w)
    for name, a, b in zip('q k v g_fwd g_bwd'.split(), got, want):
        assert a.dtype == (dtype if name in 'qkv' else torch.float32)
        torch.testing.assert_close(
            a.float(), b, rtol=rtol, atol=rtol * b.abs().max().item(),
            msg=name,
        )  # fmt: skip


@pytest.mark.cuda
def test_triton_vanishing_gates_on_cuda():
    q, k, v, g_fwd, g_bwd = _cuda_inputs(785, torch.float32, B=1, H=2)
    g_fwd[:, :, ::7] = -30.0
    g_bwd[:, :, 3::11] = -60.0
    tensors = [t.requires_grad_() for t in (q, k, v, g_fwd, g_bwd)]
    out = bidirectional_gla(*tensors, backend='triton')
    ref = bidirectional_gla(*tensors, backend='torch')
    tol = dict(rtol=5e-3, atol=5e-3 * ref.abs().max().item())
    torch.testing.assert_close(out, ref, **tol)
    for a in torch.autograd.grad(out, tensors, torch.ones_like(out)):
        assert a.isfinite().all()
