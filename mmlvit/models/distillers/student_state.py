"""A distiller's state dict is its student's: the state-dict hooks that
save the student alone under plain classifier keys and load such a state
dict back, the teacher keeping its weights."""

import torch.nn as nn

STUDENT, TEACHER = 'student.', 'teacher.'


def _student_key(key, prefix):
    """The plain-classifier name of a distiller state key, or None.

    ``prefix + 'student.x'`` -> ``prefix + 'x'`` and (metadata)
    ``prefix + 'student'`` -> ``prefix[:-1]``; any other key of the
    distiller (teacher, losses, shared preprocessor) -> None.
    """
    if key == prefix + STUDENT[:-1]:
        return prefix[:-1]
    if key.startswith(prefix + STUDENT):
        return prefix + key[len(prefix + STUDENT) :]
    return None


def save_student_only(
    module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict
) -> None:
    """state_dict post-hook: keep the student alone, without its prefix.

    The result is an ordinary ImageClassifier state dict (``backbone.*``,
    ``head.*``), also inside wrappers (the EMA model's ``module.*``).
    """
    tables = [state_dict]
    if getattr(state_dict, '_metadata', None) is not None:
        tables.append(state_dict._metadata)
    for table in tables:
        own = [
            (k, table.pop(k))
            for k in list(table)
            if k == prefix[:-1] or k.startswith(prefix)
        ]
        for key, value in own:
            new_key = _student_key(key, prefix)
            if new_key is not None:
                table[new_key] = value


def load_student_only(
    module: nn.Module,
    state_dict: dict,
    prefix: str,
    local_metadata: dict,
    strict: bool,
    missing_keys: list[str],
    unexpected_keys: list[str],
    error_msgs: list[str],
) -> None:
    """load_state_dict pre-hook: accept a student-only (plain classifier)
    state dict, as written by :func:`save_student_only`; the teacher keeps
    its weights. A state dict with ``student.*`` keys loads unchanged."""
    own = [k for k in state_dict if k.startswith(prefix)]
    if any(k.startswith((prefix + STUDENT, prefix + TEACHER)) for k in own):
        return
    for key in own:
        state_dict[prefix + STUDENT + key[len(prefix) :]] = state_dict.pop(key)
    for key, value in module.teacher.state_dict().items():
        state_dict[prefix + TEACHER + key] = value


def keep_student_only(distiller: nn.Module) -> None:
    """Make ``distiller`` (with ``student`` and ``teacher`` children) save
    and load its student alone, under plain classifier keys."""
    distiller.register_state_dict_post_hook(save_student_only)
    distiller.register_load_state_dict_pre_hook(load_student_only)
