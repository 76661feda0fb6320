"""Initialise a linear student from a softmax checkpoint before training."""

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmpretrain.registry import HOOKS

from mmlvit.engine.conversion_optim import check_groups_match_report
from mmlvit.transfer import apply_init, load_softmax_checkpoint, resolve_policy
from mmlvit.transfer.readers import FORMATS


def find_student(model):
    """The classifier to initialise: the model itself, or its ``student``
    when it is a distiller; DDP-style wrappers are unwrapped."""
    if is_model_wrapper(model):
        model = model.module
    return getattr(model, 'student', model)


@HOOKS.register_module()
class SoftmaxToLinearInitHook(Hook):
    """Copy the chosen components of a softmax checkpoint into the student.

    Runs in ``before_train``, i.e. after mmengine's ``init_weights`` (which
    would overwrite a copy made earlier), and does nothing when the run
    resumes or loads a checkpoint (``resume``/``load_from``): the weights
    then come from that checkpoint. Logs the copy table of
    :class:`mmlvit.transfer.CopyReport`.

    Args:
        checkpoint (str, optional): Softmax checkpoint file (any format of
            :func:`mmlvit.transfer.load_softmax_checkpoint`). Defaults to
            the config's ``model.teacher_checkpoint`` (a distillation run
            copies from its teacher's file). Settings that copy nothing
            (Random, Mimetic, Impulse) read no file.
        setting (str): Initialisation setting (``mmlvit.transfer.SETTINGS``:
            Random, Mimetic, Impulse, Copy, MLPCopy, FullCopy and its
            variants FullCopyNoClsToken, FullCopyNoClsTokenPosEmbed,
            FullCopyNoEmbeddings, also accepted as the paper's Variant1-3).
            Defaults to 'MLPCopy'.
        components (list[str], optional): Copy exactly these components
            instead of the setting's list (``mmlvit.transfer.COMPONENTS``).
        format (str): Checkpoint layout, or 'auto' (default) to detect it.
        copy_softmax_attention (bool): In a hybrid student, also copy the
            attention weights (``attn_qkv``, ``attn_proj``) of the blocks
            whose operator is softmax attention, whatever the setting.
            Defaults to False.

    Example:
        >>> custom_hooks = [dict(type='SoftmaxToLinearInitHook',
        ...                      checkpoint='deit_tiny_patch16_224.pth',
        ...                      setting='MLPCopy')]
    """

    priority = 'VERY_HIGH'

    def __init__(
        self,
        checkpoint=None,
        setting='MLPCopy',
        components=None,
        format='auto',
        copy_softmax_attention=False,
    ):
        self.policy = resolve_policy(setting, components)  # fail early
        self.copy_softmax_attention = copy_softmax_attention
        if format not in FORMATS:
            raise ValueError(
                f'Unknown checkpoint format {format!r}; choose from {FORMATS}.'
            )
        self.checkpoint = checkpoint
        self.format = format

    def before_train(self, runner):
        # mmengine 0.10: ``_has_loaded`` is set once ``load_or_resume`` has
        # resumed or loaded a checkpoint (a --resume with nothing to resume
        # from leaves it False: then this is a fresh run).
        if runner._has_loaded:
            runner.logger.info(
                'SoftmaxToLinearInitHook: the run resumed or loaded a '
                'checkpoint; the softmax weights are not copied again.'
            )
            return
        checkpoint = self.checkpoint
        if checkpoint is None:
            checkpoint = runner.cfg.get('model', {}).get('teacher_checkpoint')
        report = self.initialise(runner.model, checkpoint)
        source = f'\n(from {checkpoint})' if self.policy.components else ''
        runner.logger.info(report.table() + source)
        check_groups_match_report(runner.optim_wrapper, runner.model, report)

    def initialise(self, model, checkpoint=None):
        """Apply the policy to the student of ``model``.

        Args:
            model (nn.Module): A classifier or a distiller (``student``).
            checkpoint (str, optional): Overrides the hook's checkpoint.

        Returns:
            mmlvit.transfer.CopyReport
        """
        checkpoint = checkpoint or self.checkpoint
        if not self.policy.components and not self.copy_softmax_attention:
            state_dict = {}  # nothing to copy, nothing to read
        elif checkpoint is None:
            raise ValueError(
                f'SoftmaxToLinearInitHook: setting {self.policy.setting.name} '
                f'copies {list(self.policy.components)} but no softmax '
                "checkpoint is set: set the hook's checkpoint "
                "(custom_hooks=[dict(type='SoftmaxToLinearInitHook', "
                'checkpoint=PATH, ...)]) or, in a distillation config, '
                'model.teacher_checkpoint.'
            )
        else:
            state_dict = load_softmax_checkpoint(checkpoint, self.format)
        return apply_init(
            find_student(model),
            state_dict,
            self.policy.setting.name,
            self.policy.components,
            copy_softmax_attention=self.copy_softmax_attention,
        )
