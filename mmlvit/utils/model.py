"""Find the model a run trains inside its wrappers.

A runner's model may be wrapped for distributed training (DDP, FSDP, any
of mmengine's model wrappers: the model is ``.module``) and may be a
distiller that trains a ``student`` against a frozen teacher. Duck-typed:
a distiller is any model with a ``student``.
"""

import torch.nn as nn
from mmengine.model import is_model_wrapper


def unwrap_model(model: nn.Module) -> nn.Module:
    """``model`` without its DDP/FSDP-style wrapper (mmengine's
    ``is_model_wrapper``), or ``model`` itself."""
    return model.module if is_model_wrapper(model) else model


def student_of(model: nn.Module) -> nn.Module | None:
    """The ``student`` of a distiller, wrapped or not; None for a model
    without one."""
    return getattr(unwrap_model(model), 'student', None)


def find_student(model: nn.Module) -> nn.Module:
    """The classifier a run trains: the student of a distiller, else the
    model itself; wrappers are unwrapped."""
    student = student_of(model)
    return unwrap_model(model) if student is None else student
