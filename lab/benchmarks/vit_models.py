"""Whole ViTs for the benchmarks: the softmax reference, timm's ViT of the
same shape, a linear ViT or a hybrid whose last blocks keep softmax
attention, and their forward FLOPs."""

import inspect

import torch
from mmpretrain.models import VisionTransformer
from mmpretrain.registry import MODELS

from mmlvit.models.attentions import registered_operators
from mmlvit.models.backbones import LinearVisionTransformer
from mmlvit.ops.common.triton_runtime import interpreting

from .options import autocast

SOFTMAX = 'softmax'
TIMM = 'timm'


def hybrid_name(operator, keep_softmax):
    """The model name of ``operator`` with its last ``keep_softmax`` blocks
    softmax: ``OPERATOR+Ksoftmax``."""
    return f'{operator}+{keep_softmax}softmax'


def timm_vit_class():
    """timm's ``VisionTransformer``, or None when timm does not import."""
    try:
        from timm.models.vision_transformer import VisionTransformer as Vit
    except ImportError:
        return None
    return Vit


def block_operators(name, depth):
    """The attention operator of every block of model ``name``."""
    if name in (SOFTMAX, TIMM):
        return ['SoftmaxAttention'] * depth
    operator, _, keep = name.partition('+')
    k = int(keep.removesuffix('softmax')) if keep else 0
    return [operator] * (depth - k) + ['SoftmaxAttention'] * k


def build_model(name, arch, img_size, num_layers=None, attn_options=None):
    """The softmax reference (``softmax``), timm's ViT of the same shape
    (``timm``, patch 16), a linear ViT with operator ``name``, or a hybrid
    ``OPERATOR+Ksoftmax`` whose last K blocks keep softmax attention.

    ``num_layers`` overrides the arch's block count; ``attn_options`` (e.g.
    ``dict(backend='triton')``) go to every linear block's operator."""
    zoo = dict(VisionTransformer.arch_zoo[arch])
    zoo['num_layers'] = num_layers or zoo['num_layers']
    if name == SOFTMAX:
        return VisionTransformer(arch=zoo, img_size=img_size)
    if name == TIMM:
        return timm_vit_class()(
            img_size=img_size,
            patch_size=16,
            embed_dim=zoo['embed_dims'],
            depth=zoo['num_layers'],
            num_heads=zoo['num_heads'],
            mlp_ratio=zoo['feedforward_channels'] / zoo['embed_dims'],
            num_classes=0,
        )
    operator = name.partition('+')[0]

    def cfg(op):
        options = (attn_options or {}) if op == operator else {}
        return dict(type=op, **options)

    ops = block_operators(name, zoo['num_layers'])
    attn_cfg = [cfg(op) for op in ops] if '+' in name else cfg(ops[0])
    # Patch-tokens-only operators get their own token layout (no class
    # token, average pooling, sin-cos positions) from the backbone.
    return LinearVisionTransformer(
        arch=zoo, img_size=img_size, attn_cfg=attn_cfg
    )


def interpreted_kernel_options(operator):
    """``dict(backend='triton')`` where ``operator`` has fused kernels and
    Triton's interpreter runs them here (``TRITON_INTERPRET=1``), else no
    options: on the CPU, a model built with them takes its GPU path."""
    cls = registered_operators()[operator]
    takes_backend = 'backend' in inspect.signature(cls.__init__).parameters
    return dict(backend='triton') if takes_backend and interpreting() else {}


def depth_builder(name, arch, size):
    """``blocks -> model``: the softmax ViT or a linear ViT of ``name``
    (on its fused kernels where the interpreter runs them) with ``blocks``
    blocks of ``arch``'s shape."""
    options = None if name == SOFTMAX else interpreted_kernel_options(name)
    return lambda blocks: build_model(name, arch, size, blocks, options)


def counted_models(operators):
    """(name, path) of the softmax ViT and of a linear ViT of each of
    ``operators`` as :func:`depth_builder` builds them: ``'SDPA'``,
    ``'fused (interpreted)'`` or ``'PyTorch'``."""
    yield SOFTMAX, 'SDPA'
    for name in operators:
        fused = interpreted_kernel_options(name)
        yield name, 'fused (interpreted)' if fused else 'PyTorch'


def model_step(name, arch, size, batch, device, dtype, training):
    """One step of model ``name`` (:func:`build_model`, made on ``device``)
    on a random batch of ``batch`` images of ``size`` px, as a callable:
    forward + backward (loss = sum of the features, gradients cleared) if
    ``training``, else forward without grad; under ``dtype``'s autocast."""
    torch.manual_seed(0)
    with torch.device(device):  # weights made (and initialised) there
        model = build_model(name, arch, size).to(device)
        images = torch.randn(batch, 3, size, size)
    model.train(training)

    def step():
        with torch.set_grad_enabled(training), autocast(device, dtype):
            features = model(images)
        if training:
            features = features[0] if isinstance(features, tuple) else features
            features.float().sum().backward()
            model.zero_grad(set_to_none=True)

    return step


def forward_flops(name, arch, size):
    """Forward FLOPs of the model on one image (2 per multiply-add): every
    block's attention (its operator's ``flops``), MLP and the patch
    embedding (norms, heads and element-wise ops left out)."""
    zoo = VisionTransformer.arch_zoo[arch]
    C, heads, depth = zoo['embed_dims'], zoo['num_heads'], zoo['num_layers']
    hw = (size // 16, size // 16)
    ops = block_operators(name, depth)
    patches = hw[0] * hw[1]
    n = patches + int(not registered_operators()[ops[0]].patch_tokens_only)
    modules = {
        op: MODELS.build(dict(type=op, embed_dims=C, num_heads=heads))
        for op in set(ops)
    }
    attention = sum(modules[op].flops(n, hw) for op in ops)
    mlp = 2 * n * C * zoo['feedforward_channels'] * 2
    return attention + depth * mlp + 2 * patches * 3 * 16 * 16 * C
