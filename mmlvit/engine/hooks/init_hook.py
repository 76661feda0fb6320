"""Initialise a linear student from a softmax checkpoint before training."""

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmpretrain.registry import HOOKS

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
        checkpoint (str): Softmax checkpoint file (any format of
            :func:`mmlvit.transfer.load_softmax_checkpoint`).
        setting (str): Initialisation setting (``mmlvit.transfer.SETTINGS``:
            Random, Mimetic, Impulse, Copy, MLPCopy, FullCopy, Variant1-3).
            Defaults to 'MLPCopy'.
        components (list[str], optional): Copy exactly these components
            instead of the setting's list (``mmlvit.transfer.COMPONENTS``).
        format (str): Checkpoint layout, or 'auto' (default) to detect it.

    Example:
        >>> custom_hooks = [dict(type='SoftmaxToLinearInitHook',
        ...                      checkpoint='deit_tiny_patch16_224.pth',
        ...                      setting='MLPCopy')]
    """

    priority = 'VERY_HIGH'

    def __init__(
        self, checkpoint, setting='MLPCopy', components=None, format='auto'
    ):
        resolve_policy(setting, components)  # fail at build time
        if format not in FORMATS:
            raise ValueError(
                f'Unknown checkpoint format {format!r}; choose from {FORMATS}.'
            )
        self.checkpoint = checkpoint
        self.setting = setting
        self.components = components
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
        report = self.initialise(runner.model)
        runner.logger.info(f'{report.table()}\n(from {self.checkpoint})')

    def initialise(self, model):
        """Apply the policy to the student of ``model``.

        Returns:
            mmlvit.transfer.CopyReport
        """
        state_dict = load_softmax_checkpoint(self.checkpoint, self.format)
        return apply_init(
            find_student(model), state_dict, self.setting, self.components
        )
