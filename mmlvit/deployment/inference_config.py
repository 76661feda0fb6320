"""The plain classifier config of an mmlvit config.

mmpretrain's inferencer (``ImageClassificationInferencer``,
``inference_model``, ``get_model``) builds ``cfg.model`` and loads a
checkpoint into it. For an ``AttentionDistiller`` config that model is the
distiller, which also builds the softmax teacher and reads its checkpoint,
though a distiller's checkpoints hold the student alone (an ordinary
classifier state dict). :func:`classifier_config` swaps in the student.
"""

import copy

from mmengine.config import Config

DISTILLER_TYPES = ('AttentionDistiller',)


def classifier_config(cfg):
    """``cfg`` with ``model`` the classifier its checkpoints hold.

    A distiller's ``model`` becomes its ``student`` (with the distiller's
    data preprocessor, which the student uses in training), and the
    training-only parts that name the teacher or the init (``custom_hooks``,
    ``load_from``) are dropped; any other config is returned as a copy.

    Args:
        cfg (Config | str): A config or its path.

    Returns:
        Config: A new config.
    """
    cfg = Config.fromfile(cfg) if isinstance(cfg, str) else copy.deepcopy(cfg)
    model = cfg.model
    if model.get('type') not in DISTILLER_TYPES:
        return cfg
    student = copy.deepcopy(model.student)
    if not isinstance(student, dict):
        raise TypeError(
            f'{model.type}.student must be a config dict to write a '
            f'classifier config, got {type(student).__name__}.'
        )
    preprocessor = model.get('data_preprocessor') or cfg.get(
        'data_preprocessor'
    )
    if preprocessor is not None:
        student.setdefault('data_preprocessor', copy.deepcopy(preprocessor))
    cfg.model = student
    for key in ('custom_hooks', 'load_from'):
        cfg.pop(key, None)
    return cfg
