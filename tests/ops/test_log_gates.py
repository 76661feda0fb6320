"""GLA's log-gates from the low-rank gate projection: the backend choice;
the fused kernels on CPU under Triton's interpreter
(log_gates_interpreter.py, in a subprocess) against the float64
reference, gates and the gradients of the tokens and the three weights,
and GLA's module running them; on CUDA at real sizes."""

import interpreter_run
import pytest
import torch
import torch.nn.functional as F

from mmlvit.ops.gla import log_gates
from mmlvit.ops.gla.gates import within_chunks


def test_auto_is_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    inputs = (
        torch.randn(2, 5, 24),
        torch.randn(4, 24),
        torch.randn(48, 4),
        torch.randn(48),
    )
    g_fwd, g_bwd = log_gates(*inputs, 3, 16.0)
    x, down, up, bias = inputs
    logits = x @ down.T @ up.T + bias
    expected = F.logsigmoid(logits).div(16).view(2, 5, 2, 3, 8)
    torch.testing.assert_close(g_fwd, expected[:, :, 0].transpose(1, 2))
    torch.testing.assert_close(g_bwd, expected[:, :, 1].transpose(1, 2))
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        log_gates(*inputs, 3, 16.0, backend='triton')


def test_within_chunks_equals_explicit_sums():
    """Against sums written out token by token, the last chunk partial;
    gradients flow to the gates."""
    g_fwd, g_bwd = ((-torch.rand(2, 3, 150, 4)).requires_grad_() for _ in '12')
    c_fwd, c_bwd = within_chunks(g_fwd, g_bwd, 64)
    want_fwd, want_bwd = torch.zeros_like(c_fwd), torch.zeros_like(c_bwd)
    for t in range(150):
        start, end = t // 64 * 64, min(t // 64 * 64 + 64, 150)
        want_fwd[:, :, t] = g_fwd[:, :, start : t + 1].sum(2)
        want_bwd[:, :, t] = g_bwd[:, :, t:end].sum(2)
    torch.testing.assert_close(c_fwd, want_fwd)
    torch.testing.assert_close(c_bwd, want_bwd)
    (c_fwd.sum() + 2 * c_bwd.sum()).backward()
    # g_t is in the sums at t and after (forward), at t and before.
    position = torch.arange(150) % 64
    length = torch.where(torch.arange(150) < 128, 64, 150 - 128)
    torch.testing.assert_close(
        g_fwd.grad[0, 0, :, 0], (length - position).float()
    )
    torch.testing.assert_close(g_bwd.grad[0, 0, :, 0], 2 * (position + 1.0))


def _tf32(x, nearest):
    """fp32 -> tf32 (10 mantissa bits) as fp32: rounded to nearest, ties
    away (PTX's cvt.rna.tf32.f32), or truncated (what a tensor core reads
    of an fp32 operand)."""
    bits = x.view(torch.int32)
    if nearest:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


def _tf32_product(a, b):
    """One tf32 tensor-core product, fp32 sums (11-bit significands
    multiply exactly in fp32)."""
    return _tf32(a, False) @ _tf32(b, False)


def _three_tf32_products(a, b):
    """Triton's input_precision='tf32x3' (the kernels' GRAD_PRECISION):
    a_lo b_hi + a_hi b_lo + a_hi b_hi, a_hi = tf32(a), a_lo = a - a_hi."""
    a_hi, b_hi = _tf32(a, True), _tf32(b, True)
    low = _tf32_product(a - a_hi, b_hi) + _tf32_product(a_hi, b - b_hi)
    return low + _tf32_product(a_hi, b_hi)


def _one_tf32_product(a, b):
    return _tf32_product(_tf32(a, True), _tf32(b, True))


def _gradient_product_errors(product):
    """Relative norm errors against float64 of the gate kernels' gradient
    products, tiled as they tile them, at the sizes of the CUDA check
    below (1025 tokens, C = 768, rank 16): df = dl W_up (one head's 64
    channels a product), dW_up = dl^T f and dW_down = df^T x (64 tokens a
    product), dx = df W_down."""
    torch.manual_seed(0)
    n, c, r = 1025, 768, 16
    x = torch.randn(n, c).bfloat16().float()
    down = torch.randn(r, c) / c**0.5
    up = torch.randn(2 * c, r) * 2
    f = (x.double() @ down.double().T).float()
    dl = torch.randn(n, 2 * c) * torch.rand(n, 2 * c) / 16  # dg sigmoid / T
    df = (dl.double() @ up.double()).float()
    heads = [slice(h, h + 64) for h in range(0, 2 * c, 64)]
    rows = [slice(t, t + 64) for t in range(0, n, 64)]
    exact = lambda a, b: a.double() @ b.double()  # noqa: E731
    got_want = (
        (sum(product(dl[:, h], up[h]) for h in heads), exact(dl, up)),
        (sum(product(dl[t].T, f[t]) for t in rows), exact(dl.T, f)),
        (torch.cat([product(df[t], down) for t in rows]), exact(df, down)),
        (sum(product(df[t].T, x[t]) for t in rows), exact(df.T, x)),
    )
    return [
        ((got.double() - want).norm() / want.norm()).item()
        for got, want in got_want
    ]


def test_three_tf32_products_keep_the_gradients_within_1e6():
    """The gate kernels' gradients multiply as three tf32 products: as
    close to float64 as fp32 multiply-adds (within 1e-6, the contract the
    CUDA check below holds them to), where one tf32 product is 300 times
    further off."""
    fp32 = _gradient_product_errors(torch.matmul)
    three = _gradient_product_errors(_three_tf32_products)
    one = _gradient_product_errors(_one_tf32_product)
    assert max(fp32) < 3e-7 and max(three) < 3e-7, (fp32, three)
    assert min(one) > 1e-4, one


interpreter_report = interpreter_run.report_fixture(
    'log_gates_interpreter.py', timeout=600
)


def test_kernels_match_float64_reference(interpreter_report):
    """Within 1e-6, the gradient of half-precision tokens within one
    rounding to their dtype; backward keeps only the inputs and the
    (B, N, R) fp32 features."""
    cases = interpreter_report['cases']
    assert {c['N'] for c in cases} == {50, 150, 197}
    assert {(c['d'], c['R']) for c in cases} == {(16, 16), (24, 5), (64, 16)}
    assert {c['dtype'] for c in cases} == {'fp32', 'bf16', 'fp16'}
    assert {c['chunk'] for c in cases} == {None, 64, 32}
    rounding = {'fp32': 1e-6, 'bf16': 2**-8, 'fp16': 2**-11}
    names = {'fp32': 'float32', 'bf16': 'bfloat16', 'fp16': 'float16'}
    for case in cases:
        assert case['finite'] and case['largest'] <= 0, case
        assert max(case['gates']) < 1e-6, case
        grads = dict(case['grads'])
        assert grads.pop('x') < rounding[case['dtype']], case
        assert max(grads.values()) < 1e-6, case
        x_grad = f'torch.{names[case["dtype"]]}'
        assert (
            case['dtypes']
            == ['torch.float32'] * 2 + [x_grad] + ['torch.float32'] * 3
        ), case
        batch = 1 if case['d'] == 64 else 2
        features = [batch, case['N'], case['R']]
        assert case['kept_besides_inputs'] == [features], case


def test_gla_module_runs_the_fused_gates(interpreter_report):
    """In the scan's forward and again in its backward."""
    assert interpreter_report['module_launches'] == ['gates', 'gates']


@pytest.mark.cuda
@pytest.mark.parametrize('chunk', [None, 64])
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_cuda_fused_matches_reference(dtype, chunk):
    torch.manual_seed(0)
    inputs = (
        torch.randn(8, 1025, 768, device='cuda').to(dtype),
        torch.randn(16, 768, device='cuda') / 768**0.5,
        torch.randn(2 * 768, 16, device='cuda') * 2,
        torch.randn(2 * 768, device='cuda'),
    )
    fused_in = [t.clone().requires_grad_() for t in inputs]
    refs_in = [t.double().requires_grad_() for t in inputs]
    gates = log_gates(*fused_in, 12, 16.0, chunk=chunk)
    refs = log_gates(*refs_in, 12, 16.0, backend='torch', chunk=chunk)
    grads = [torch.randn_like(r) for r in refs]
    torch.autograd.backward(gates, [g.float() for g in grads])
    torch.autograd.backward(refs, grads)
    for x, r in zip(gates, refs):
        assert (x.double() - r).norm() < 1e-6 * r.norm()
    x_rounding = 1e-6 if dtype == torch.float32 else 2**-8
    tolerances = (x_rounding, 1e-6, 1e-6, 1e-6)
    for x, r, tol in zip(fused_in, refs_in, tolerances):
        assert x.grad.dtype == x.dtype
        assert (x.grad.double() - r.grad).norm() < tol * r.grad.norm()
