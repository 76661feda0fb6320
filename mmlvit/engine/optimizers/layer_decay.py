"""Layer-wise learning-rate decay for any model with a ViT backbone.

mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the model it
is given for ``get_layer_depth``: an ``ImageClassifier`` has one, a
segmentor (MMSegmentation) or detector (MMDetection) does not, and
MMSegmentation's own constructors know BEiT, MAE and ConvNeXt backbones
only. :class:`BackboneLayerDecayOptimWrapperConstructor` asks the backbone
instead, wherever it sits (``backbone``, a distiller's ``student.backbone``).
"""

from mmengine.logging import print_log
from mmpretrain.engine.optimizers import (
    LearningRateDecayOptimWrapperConstructor,
)
from mmpretrain.registry import OPTIM_WRAPPER_CONSTRUCTORS

# MMSegmentation's decay types that mean "by ViT block".
LAYER_WISE = ('layer_wise', 'layer_wise_vit')


def find_backbones(model):
    """The submodules called ``backbone`` that have ``get_layer_depth``.

    Args:
        model (nn.Module): A classifier, segmentor, detector or distiller.

    Returns:
        list[tuple[str, nn.Module]]: (parameter-name prefix, backbone),
        e.g. ``('backbone.', vit)`` or ``('student.backbone.', vit)``, the
        shallowest first.
    """
    found = [
        (name + '.', module)
        for name, module in model.named_modules()
        if (name == 'backbone' or name.endswith('.backbone'))
        and hasattr(module, 'get_layer_depth')
    ]
    return sorted(found, key=lambda item: (item[0].count('.'), item[0]))


def _trainable(module):
    return any(p.requires_grad for p in module.parameters())


@OPTIM_WRAPPER_CONSTRUCTORS.register_module(
    name=[
        'BackboneLayerDecayOptimWrapperConstructor',
        'LearningRateDecayOptimizerConstructor',
        'LayerDecayOptimizerConstructor',
    ]
)
class BackboneLayerDecayOptimWrapperConstructor(
    LearningRateDecayOptimWrapperConstructor
):
    """mmpretrain's layer-wise learning-rate decay, with the depths taken
    from the model's backbone.

    A parameter of a backbone at depth d gets ``lr * rate ** (L + 1 - d)``
    for a backbone of L blocks (``get_layer_depth``: the patch embedding,
    position embedding and class token at depth 0, block i at i + 1, the
    final norm at L + 1); every other parameter (neck, heads) gets ``lr``.
    Frozen parameters get no group. Weight-decay options are mmpretrain's
    (``norm_decay_mult``, ``bias_decay_mult``, ``flat_decay_mult``,
    ``custom_keys`` with ``decay_mult``). A model with its own
    ``get_layer_depth`` (an ``ImageClassifier``) is handled exactly as
    mmpretrain's constructor does.

    ``paramwise_cfg``:

    - ``layer_decay_rate`` (float): the rate. Defaults to 1 (no decay).
    - MMSegmentation's form (``LearningRateDecayOptimizerConstructor`` or
      ``LayerDecayOptimizerConstructor`` configs, recognised by
      ``num_layers``): ``num_layers`` (checked against the backbone),
      ``decay_rate`` (the rate), ``decay_type`` (``'layer_wise'``) and, as
      there, no weight decay on 1-D parameters (norms, biases) unless
      ``flat_decay_mult`` says otherwise.

    Registered in mmpretrain's ``OPTIM_WRAPPER_CONSTRUCTORS`` under its own
    name and MMSegmentation's two names, so a segmentation or detection
    config writes ``constructor='mmpretrain.<name>'``.

    Example:
        >>> optim_wrapper = dict(
        ...     optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
        ...     constructor=('mmpretrain.'
        ...                  'BackboneLayerDecayOptimWrapperConstructor'),
        ...     paramwise_cfg=dict(layer_decay_rate=0.65,
        ...                        flat_decay_mult=0.0))
    """

    def __init__(self, optim_wrapper_cfg, paramwise_cfg=None):
        paramwise_cfg = dict(paramwise_cfg or {})
        self.expected_num_layers = None
        if 'num_layers' in paramwise_cfg:
            paramwise_cfg = _from_mmseg_form(paramwise_cfg)
            self.expected_num_layers = paramwise_cfg.pop('num_layers')
        super().__init__(optim_wrapper_cfg, paramwise_cfg)

    def add_params(
        self, params, module, prefix='', get_layer_depth=None, **kwargs
    ):
        if not prefix and get_layer_depth is None:
            get_layer_depth = self._depth_function(module)
        super().add_params(params, module, prefix, get_layer_depth, **kwargs)

    def _depth_function(self, model):
        """``param_name -> (depth, num_depths)`` from the backbone(s) of
        ``model``; None for a model with its own ``get_layer_depth``."""
        if hasattr(model, 'get_layer_depth'):
            return None
        backbones = find_backbones(model)
        if not backbones:
            raise NotImplementedError(
                f'Layer-wise learning-rate decay needs the depth of every '
                f'parameter, but {type(model).__name__} has neither '
                '`get_layer_depth` nor a submodule `backbone` with one.'
            )
        # The trainable backbone (a distiller's teacher is frozen) sets the
        # depth of parameters outside every backbone: the last one, full lr.
        main_prefix, main = next(
            (item for item in backbones if _trainable(item[1])), backbones[0]
        )
        _, num_depths = main.get_layer_depth('', prefix=main_prefix)
        self._check_num_layers(main, main_prefix)
        deepest_first = sorted(backbones, key=lambda item: -len(item[0]))
        rate = self.paramwise_cfg.get('layer_decay_rate', 1.0)
        print_log(
            f'Layer-wise lr decay {rate:g} over the {num_depths} depths of '
            f'{main_prefix[:-1]} ({type(main).__name__}); parameters outside '
            'backbones at the base lr.',
            logger='current',
        )

        def get_layer_depth(param_name):
            for backbone_prefix, backbone in deepest_first:
                if param_name.startswith(backbone_prefix):
                    return backbone.get_layer_depth(
                        param_name, backbone_prefix
                    )
            return num_depths - 1, num_depths

        return get_layer_depth

    def _check_num_layers(self, backbone, where):
        expected = self.expected_num_layers
        num_layers = getattr(backbone, 'num_layers', None)
        if None not in (expected, num_layers) and expected != num_layers:
            raise ValueError(
                f'paramwise_cfg.num_layers={expected} but {where[:-1]} has '
                f'{num_layers} layers: set num_layers={num_layers} (or drop '
                'it and give layer_decay_rate).'
            )


def _from_mmseg_form(paramwise_cfg):
    """MMSegmentation's ``paramwise_cfg`` keys in mmpretrain's form."""
    cfg = dict(paramwise_cfg)
    decay_type = cfg.pop('decay_type', 'layer_wise')
    if decay_type not in LAYER_WISE:
        raise ValueError(
            f'decay_type={decay_type!r}: a ViT backbone decays by block, use '
            f'{LAYER_WISE[0]!r}.'
        )
    if 'decay_rate' in cfg:
        rate = cfg.pop('decay_rate')
        if cfg.setdefault('layer_decay_rate', rate) != rate:
            raise ValueError(
                'paramwise_cfg gives both decay_rate and layer_decay_rate '
                'with different values; give one.'
            )
    cfg.setdefault('flat_decay_mult', 0.0)
    return cfg
