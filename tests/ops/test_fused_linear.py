"""The fused Triton kernels of kernel attention (ELU+1, ReLU, identity)
and InLine: the backend choice and its errors; on CPU under Triton's
interpreter (fused_linear_interpreter.py, in a subprocess) against float64
references, outputs and every gradient; on CUDA at real sizes."""

from types import SimpleNamespace

import interpreter_run
import pytest
import torch

from mmlvit.models.attentions import (
    ELULinearAttention,
    InLineAttention,
    MHLAttention,
    ReLULinearAttention,
)
from mmlvit.ops import inline_attention, kernel_linear_attention
from mmlvit.ops.common.dispatch import BACKENDS, check_backend, use_fused


def qkv(B=2, H=2, N=10, d=8, dtype=torch.float32, device='cpu'):
    return [torch.randn(B, H, N, d, dtype=dtype, device=device) for _ in '123']


# ------------------------------------------------------ backend choice


def test_check_backend_names_the_backends():
    for backend in BACKENDS:
        check_backend(backend)
    with pytest.raises(
        ValueError, match="Unknown linear-attention backend 'cuda'"
    ):
        check_backend('cuda')
    with pytest.raises(ValueError, match='Unknown linear-attention backend'):
        ReLULinearAttention(embed_dims=16, num_heads=2, backend='fast')


def test_auto_takes_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    q, k, v = qkv()
    assert not use_fused('auto', q, k, v)
    assert not use_fused('torch', q, k, v)
    # It runs (through the reference) without Triton's driver.
    kernel_linear_attention(q, k, v, kernel='relu')
    inline_attention(q, k, v)


def test_triton_backend_on_cpu_or_fp64_raises_clearly(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    q, k, v = qkv()
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        kernel_linear_attention(q, k, v, kernel='elu', backend='triton')
    monkeypatch.setenv('TRITON_INTERPRET', '1')
    q, k, v = qkv(dtype=torch.float64)
    with pytest.raises(RuntimeError, match='takes fp32, bf16 or fp16'):
        inline_attention(q, k, v, backend='triton')


def cuda_token(dtype=torch.bfloat16, width=64):
    """A stand-in for a CUDA tensor of heads of ``width`` channels (no GPU
    here): what ``use_fused`` reads of its tensors."""
    cuda = torch.device('cuda')
    return SimpleNamespace(device=cuda, dtype=dtype, shape=(width,))


@pytest.fixture
def h100_dispatch(monkeypatch):
    """``fused_linear.dispatch`` as on an H100: Triton imports and a
    program may have 227 KiB of shared memory (no GPU to ask here)."""
    import mmlvit.ops.common.dispatch as dispatch
    import mmlvit.ops.common.triton_runtime as runtime

    monkeypatch.setattr(dispatch, 'triton_importable', lambda: True)
    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 227 * 1024
    )
    return dispatch


def test_fused_kernels_give_way_to_the_reference_while_exporting(
    monkeypatch, h100_dispatch
):
    dispatch = h100_dispatch
    cuda_tensor = cuda_token()
    assert dispatch.use_fused('auto', cuda_tensor)
    monkeypatch.setattr(dispatch, 'exporting', lambda: True)
    assert not dispatch.use_fused('auto', cuda_tensor)
    # As GLA's backends do, 'triton' gives way too: an exported graph
    # holds the reference's ops, the same function.
    assert not dispatch.use_fused('triton', cuda_tensor)
    monkeypatch.setattr(dispatch, 'exporting', lambda: False)
    assert not dispatch.use_fused('auto', cuda_token(torch.float64))
    wide = cuda_token(width=80)
    assert not dispatch.use_fused('auto', wide)
    with pytest.raises(RuntimeError, match='heads of at most 64'):
        dispatch.use_fused('triton', wide)


def test_auto_needs_the_shared_memory_of_the_dtypes_kernels(monkeypatch):
    """On a GPU whose programs may have less shared memory than an A100's
    (sm_86 / sm_89: 99 KiB), 'auto' runs the kernels for bf16 tokens only
    and 'triton' names the limit and the fix."""
    import mmlvit.ops.common.dispatch as dispatch
    import mmlvit.ops.common.triton_runtime as runtime

    monkeypatch.setattr(dispatch, 'triton_importable', lambda: True)
    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 99 * 1024
    )
    assert dispatch.use_fused('auto', cuda_token(torch.bfloat16))
    for dtype in (torch.float16, torch.float32):
        assert not dispatch.use_fused('auto', cuda_token(dtype))
        with pytest.raises(RuntimeError, match='99 KiB.*bf16 autocast'):
            dispatch.use_fused('triton', cuda_token(dtype))
    # One fp32 tensor among bf16 ones is enough to need the room.
    assert not dispatch.use_fused(
        'auto', cuda_token(torch.bfloat16), cuda_token(torch.float32)
    )
    # Kernels that need a few KB (the depthwise convolutions) run anyway.
    fp16 = cuda_token(torch.float16)
    assert dispatch.use_fused('auto', fp16, needs_shared_memory=False)
    assert dispatch.use_fused('triton', fp16, needs_shared_memory=False)
    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 163 * 1024
    )
    assert dispatch.use_fused('auto', cuda_token(torch.float16))
    assert dispatch.use_fused('triton', cuda_token(torch.float32))
    # Under 99 KiB (a T4's 64) not even bf16 fits.
    monkeypatch.setattr(
        runtime, '_shared_memory_per_program', lambda d: 64 * 1024
    )
    assert not dispatch.use_fused('auto', cuda_token(torch.bfloat16))
    with pytest.raises(RuntimeError, match='at least 99 KiB.*cuda: 64 KiB'):
        dispatch.use_fused('triton', cuda_token(torch.bfloat16))


def test_rocm_gpus_take_the_pytorch_path(monkeypatch, h100_dispatch):
    """A ROCm build of PyTorch calls AMD GPUs ``cuda`` devices: 'auto'
    takes the PyTorch path there (the kernels use NVIDIA PTX and launch
    options), 'triton' says why, and GLA's backend choice does the
    same."""
    from mmlvit.ops.gla.triton_function import unsupported_reason

    dispatch, token = h100_dispatch, cuda_token()
    assert dispatch.use_fused('auto', token)
    monkeypatch.setattr(torch.version, 'hip', '6.4.0')
    assert not dispatch.use_fused('auto', token)
    assert not dispatch.use_fused('auto', token, needs_shared_memory=False)
    with pytest.raises(RuntimeError, match='NVIDIA GPUs.*ROCm'):
        dispatch.use_fused('triton', token)
    # GLA's 'auto' takes the kernels only where this gives no reason.
    reason = unsupported_reason(token, token)
    assert reason is not None and 'ROCm' in reason


def _stages(options):
    return options.get('num_stages')


@pytest.mark.parametrize(
    'shape, stages, one_launch',
    [
        ((128, 12, 197, 64), 1, 1),  # ViT-B at 224 px, batch 128: 1536 heads
        ((2, 12, 16385, 64), 1, 3),  # 2048 px, batch 2: 22 ranges a head
        ((1, 12, 64, 64), 3, 3),  # one tile a head, 12 programs
    ],
)
def test_streaming_launches_copy_ahead_only_in_small_grids(
    shape, stages, one_launch
):
    """The loops of the state, output and one-launch kernels (and TTT's
    sums and output) copy nothing ahead where their grids have many
    programs, as the reductions' splits make them; the query gradient's
    always does (Triton's default)."""
    pytest.importorskip('triton')
    from mmlvit.ops.common.linear_launch import Launch
    from mmlvit.ops.common.triton_runtime import MANY_PROGRAMS, num_stages
    from mmlvit.ops.ttt.swiglu_function import GRAD_NUM_STAGES, SwiGLULaunch

    assert num_stages(MANY_PROGRAMS - 1) == 3
    assert num_stages(MANY_PROGRAMS) == 1
    q = torch.empty(shape, dtype=torch.bfloat16, device='meta')
    launch = Launch(q, q, 'relu', 1e-6, 1.0)
    assert _stages(launch.state_constants) == stages
    assert _stages(launch.output_constants) == stages
    assert _stages(launch.one_launch_constants) == one_launch
    assert _stages(launch.query_grad_constants) is None
    ttt = SwiGLULaunch(q, 1.0, capability=(9, 0))
    assert _stages(ttt.kernel_options()) == stages
    assert _stages(ttt.grad_options()) == GRAD_NUM_STAGES


def test_unknown_kernel_is_named_before_any_backend():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="Unknown kernel 'softplus'"):
        kernel_linear_attention(q, k, v, kernel='softplus', backend='triton')


# --------------------------------------- the kernels, under the interpreter


interpreter_report = interpreter_run.report_fixture(
    'fused_linear_interpreter.py', timeout=600
)


# Relative-error bounds: fp32 arithmetic; fp16 outputs and gradients are
# rounded once to their dtype (11 significant bits); with bf16 inputs the
# operands of the products (feature maps, states) are rounded to bf16 too
# (8 bits), so up to two bf16 roundings.
BOUNDS = {'float32': 2e-6, 'bfloat16': 2e-2, 'float16': 1.5e-3}
# The identity kernel's signed denominators come near 0 and amplify
# rounding (the same in the reference): a looser fp32 bound.
IDENTITY_FP32 = 2e-3


@pytest.mark.parametrize('mode', ['elu', 'relu', 'identity', 'inline', 'mhla'])
def test_kernels_match_float64_reference(interpreter_report, mode):
    cases = [c for c in interpreter_report['cases'] if c['mode'] == mode]
    dtypes = {c['dtype'] for c in cases}
    assert {'float32', 'bfloat16'} <= dtypes
    if mode == 'mhla':  # grids the blocks divide or not, several tiles
        assert {c['N'] for c in cases} >= {48, 63, 70, 360}
        assert all('mixing' in c['grads'] for c in cases)
    else:
        assert {c['N'] for c in cases} >= {50, 197}
    for case in cases:
        bound = BOUNDS[case['dtype']]
        if mode == 'identity' and case['dtype'] == 'float32':
            bound = IDENTITY_FP32
        assert case['finite'], case
        assert case['out_dtype'] == case['dtype'], case
        interpreter_run.assert_within(case, bound)


@pytest.mark.parametrize('mode', ['elu', 'relu', 'identity', 'inline'])
def test_forward_runs_in_one_launch_or_two(interpreter_report, mode):
    """One segment whose reduction is one program per head: the forward is
    one launch (state and outputs in one kernel), 16-bit inputs and fp16
    key sums past fp16's range included; otherwise (the reduction split
    over programs) two. Both paths meet the bounds above."""
    cases = [c for c in interpreter_report['cases'] if c['mode'] == mode]
    one = [c for c in cases if c['one_launch']]
    assert {c['dtype'] for c in one} >= {'float32', 'bfloat16'}
    assert {c['N'] for c in one} >= {50, 197}
    assert any(not c['one_launch'] for c in cases)
    if mode != 'identity':
        assert any(c['N'] == 1000 for c in one)
    mhla = [c for c in interpreter_report['cases'] if c['mode'] == 'mhla']
    assert not any(c['one_launch'] for c in mhla)  # block states mixed


def test_qkv_gradient_is_one_buffer(interpreter_report):
    """dq, dk, dv are written into one (B, N, 3, H, d) buffer that
    split_qkv passes on as the gradient of qkv: no stack in backward."""
    cases = interpreter_report['cases']
    assert all(case['qkv_grad_shared'] for case in cases)


def test_backward_keeps_only_the_projection(interpreter_report):
    """What autograd keeps for backward is q, k, v (views of the qkv
    projection) and, for MHLA, its mixing matrix: no fp32 state (B*H,
    segments, d, d) per call; backward recomputes the states (MHLA's
    mixed ones from the unmixed ones and the matrix)."""
    cases = interpreter_report['cases']
    assert {c['mode'] for c in cases} >= {'relu', 'inline', 'mhla'}
    for case in cases:
        side = case['side']
        kept = [[side**2, side**2]] if case['mode'] == 'mhla' else []
        assert case['kept_besides_qkv'] == kept, case


def test_fp16_key_sums_past_fp16_range_stay_exact(interpreter_report):
    """Inputs of magnitude 30 over 1000 tokens: the key-value sums reach
    ~1e6 (fp16 overflows at 65504); they live in fp32 registers."""
    large = [
        c
        for c in interpreter_report['cases']
        if c['dtype'] == 'float16' and c['N'] == 1000
    ]
    assert {c['mode'] for c in large} == {'elu', 'relu', 'inline'}
    for case in large:
        assert case['finite'] and case['out'] < BOUNDS['float16'], case


# ------------------------------------------------------------- on CUDA

OPERATORS = [
    ELULinearAttention,
    ReLULinearAttention,
    InLineAttention,
    MHLAttention,
]


@pytest.mark.cuda
@pytest.mark.parametrize('module_cls', OPERATORS)
# Batch 64 at 197 tokens: 768 heads, each reduction one program (the
# one-launch forward of the kernel operators).
@pytest.mark.parametrize('N, batch', [(197, 8), (197, 64), (4097, 8)])
def test_cuda_module_fused_matches_reference(module_cls, N, batch):
    torch.manual_seed(0)
    fused = module_cls(embed_dims=768, num_heads=12).cuda()
    reference = module_cls(embed_dims=768, num_heads=12, backend='torch')
    reference.load_state_dict(fused.state_dict())
    reference.cuda()
    side = int((N - 1) ** 0.5)
    if module_cls.patch_tokens_only:
        N = side * side
    x = torch.randn(batch, N, 768, device='cuda')
    x_fused = x.clone().requires_grad_()
    with torch.autocast('cuda', dtype=torch.bfloat16):
        out = fused(x_fused, (side, side))
    out.float().square().sum().backward()
    x_ref = x.clone().requires_grad_()
    with torch.autocast('cuda', enabled=False):
        ref = reference(x_ref, (side, side))
    ref.square().sum().backward()
    rel = (out.float() - ref).norm() / ref.norm()
    grad_rel = (x_fused.grad - x_ref.grad).norm() / x_ref.grad.norm()
    assert rel < 2e-2 and grad_rel < 3e-2, (rel, grad_rel)


@pytest.mark.cuda
@pytest.mark.parametrize('mode', ['elu', 'relu', 'inline'])
@pytest.mark.parametrize(
    'dtype', [torch.float32, torch.bfloat16, torch.float16]
)
def test_cuda_op_matches_float64_at_16385_tokens(mode, dtype):
    q, k, v = (
        t.requires_grad_() for t in qkv(1, 12, 16385, 64, dtype, 'cuda')
    )
    ref_inputs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    if mode == 'inline':
        out = inline_attention(q, k, v, backend='triton')
        ref = inline_attention(*ref_inputs, backend='torch')
    else:
        out = kernel_linear_attention(q, k, v, kernel=mode, backend='triton')
        ref = kernel_linear_attention(
            *ref_inputs, kernel=mode, backend='torch'
        )
    grad = torch.randn_like(ref)
    (out.double() * grad).sum().backward()
    (ref * grad).sum().backward()
    bound = 5e-3 if dtype == torch.float32 else 2e-2
    assert torch.isfinite(out).all()
    assert (out.double() - ref).norm() / ref.norm() < bound
    for t, t_ref in zip((q, k, v), ref_inputs):
        assert (
            t.grad.double() - t_ref.grad
        ).norm() / t_ref.grad.norm() < bound
