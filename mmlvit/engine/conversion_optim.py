"""Conversion-aware optimisation: fresh and copied parameters get their own
learning rates.

A student initialised from a softmax checkpoint has two kinds of
parameters: those copied from the checkpoint (e.g. the MLPs under MLPCopy)
and fresh ones (the linear attention, gates, ...). Conversion recipes
(e.g. the DeiT-to-TTT conversion of Transformer-to-TTT) train the fresh ones
faster (``new-params-lr-multiplier``) or keep the copied ones frozen for a
while (``freeze-pretrained``). :class:`ConversionAwareOptimWrapperConstructor`
puts every parameter in its own group tagged ``copied`` True/False, from the
same plan the init hook follows (:func:`mmlvit.transfer.plan_init`), and
scales the fresh and copied learning rates; ``FreezeCopiedHook`` sets the
copied groups' learning rate to 0 for the first iterations.
:func:`check_groups_match_report` (called by ``SoftmaxToLinearInitHook``)
makes sure the groups agree with what was really copied.
"""

from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.optim import DefaultOptimWrapperConstructor
from mmpretrain.registry import OPTIM_WRAPPER_CONSTRUCTORS

from mmlvit.transfer import load_softmax_checkpoint, plan_init

COPIED = 'copied'  # the param-group tag


def _unwrapped(model):
    return model.module if is_model_wrapper(model) else model


def _student_and_prefix(model):
    """The student classifier and the prefix of its parameter names in
    ``model`` ('' or 'student.')."""
    model = _unwrapped(model)
    student = getattr(model, 'student', None)
    return (student, 'student.') if student is not None else (model, '')


def copied_parameter_names(model, report):
    """Names (in ``model``) of the parameters an init copied, wholly or in
    part (e.g. TTT's standard qkv rows)."""
    _, prefix = _student_and_prefix(model)
    return {prefix + key for key in report.keys('copied')}


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class ConversionAwareOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """mmengine's default constructor with one group per parameter, each
    tagged ``copied`` and given a learning-rate multiplier by whether the
    softmax-to-linear init copies it.

    ``paramwise_cfg`` takes mmengine's usual keys (``norm_decay_mult``,
    ``custom_keys``, ...) plus:

    - ``fresh_lr_mult`` (float): multiplies the learning rate of parameters
      the init does not copy. Defaults to 1.
    - ``copied_lr_mult`` (float): the same for copied parameters. Defaults
      to 1.
    - ``init`` (dict): the init that will run, as given to
      ``SoftmaxToLinearInitHook``: ``setting`` (default 'MLPCopy'),
      ``components``, ``copy_softmax_attention``, ``checkpoint`` (default:
      the distiller's ``teacher_checkpoint``). The hook checks at the start
      of training that the groups match what it copied.

    Example:
        >>> optim_wrapper = dict(
        ...     constructor='ConversionAwareOptimWrapperConstructor',
        ...     paramwise_cfg=dict(fresh_lr_mult=10.0,
        ...                        init=dict(setting='MLPCopy')))
    """

    def __init__(self, optim_wrapper_cfg, paramwise_cfg=None):
        paramwise_cfg = dict(paramwise_cfg or {})
        self.fresh_lr_mult = float(paramwise_cfg.pop('fresh_lr_mult', 1.0))
        self.copied_lr_mult = float(paramwise_cfg.pop('copied_lr_mult', 1.0))
        self.init = dict(paramwise_cfg.pop('init', {}))
        super().__init__(optim_wrapper_cfg, paramwise_cfg)

    def __call__(self, model):
        student, _ = _student_and_prefix(model)
        checkpoint = self.init.get('checkpoint') or getattr(
            _unwrapped(model), 'teacher_checkpoint', None
        )
        if checkpoint is None:
            raise ValueError(
                'ConversionAwareOptimWrapperConstructor needs the softmax '
                'checkpoint the init copies from: set '
                'optim_wrapper.paramwise_cfg.init.checkpoint (a distiller '
                "config uses its model's teacher_checkpoint)."
            )
        report = plan_init(
            student,
            load_softmax_checkpoint(checkpoint),
            self.init.get('setting', 'MLPCopy'),
            self.init.get('components'),
            self.init.get('copy_softmax_attention', False),
        )
        self._copied = copied_parameter_names(model, report)
        # A non-empty paramwise_cfg makes the default constructor give
        # every parameter its own group (add_params below).
        self.paramwise_cfg.setdefault('custom_keys', {})
        return super().__call__(model)

    def add_params(self, params, module, prefix='', is_dcn_module=None):
        first = len(params)
        super().add_params(params, module, prefix, is_dcn_module)
        if prefix:
            return  # the outermost call tags every group once
        names = {id(p): n for n, p in module.named_parameters()}
        counts = {True: 0, False: 0}
        for group in params[first:]:
            (param,) = group['params']
            copied = names[id(param)] in self._copied
            group[COPIED] = copied
            mult = self.copied_lr_mult if copied else self.fresh_lr_mult
            group['lr'] = group.get('lr', self.base_lr) * mult
            if param.requires_grad:
                counts[copied] += 1
        print_log(
            f'ConversionAwareOptimWrapperConstructor: {counts[True]} copied '
            f'parameter tensors at {self.copied_lr_mult:g} x lr, '
            f'{counts[False]} fresh ones at {self.fresh_lr_mult:g} x lr.',
            logger='current',
        )


def check_groups_match_report(optim_wrapper, model, report):
    """Raise when the optimizer's ``copied`` tags (set by
    :class:`ConversionAwareOptimWrapperConstructor`) disagree with what the
    init copied; do nothing for optimizers without tags."""
    optimizer = getattr(optim_wrapper, 'optimizer', None)
    groups = getattr(optimizer, 'param_groups', [])
    if not any(COPIED in g for g in groups):
        return
    copied = copied_parameter_names(model, report)
    names = {id(p): n for n, p in _unwrapped(model).named_parameters()}
    wrong = [
        names[id(p)]
        for g in groups
        for p in g['params']
        if g.get(COPIED) != (names.get(id(p)) in copied)
    ]
    if wrong:
        raise ValueError(
            f'{len(wrong)} parameters (e.g. {wrong[:3]}) are grouped as '
            'copied/fresh differently from what SoftmaxToLinearInitHook '
            'copied: give optim_wrapper.paramwise_cfg.init the same '
            'setting, components and checkpoint as the hook.'
        )
