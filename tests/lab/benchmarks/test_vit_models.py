"""The benchmarks' model builder: block count and operator options."""

from lab.benchmarks.vit_models import build_model


def test_num_layers_overrides_the_arch_for_softmax_and_linear():
    for name in ('softmax', 'ReLULinearAttention'):
        model = build_model(name, 'deit-tiny', 32, num_layers=2)
        assert len(model.layers) == 2


def test_attn_options_reach_only_the_linear_blocks_of_a_hybrid():
    model = build_model(
        'ReLULinearAttention+1softmax',
        'deit-tiny',
        32,
        num_layers=3,
        attn_options=dict(backend='torch'),
    )
    attns = [layer.attn for layer in model.layers]
    assert [a.backend for a in attns[:2]] == ['torch', 'torch']
    assert type(attns[2]).__name__ == 'SoftmaxAttention'
    assert (
        build_model('ReLULinearAttention', 'deit-tiny', 32)
        .layers[0]
        .attn.backend
        == 'auto'
    )
