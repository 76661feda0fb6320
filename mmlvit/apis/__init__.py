"""Workflows over the whole stack: build a config's model, initialise a
linear student from a softmax checkpoint and save it, or convert a softmax
checkpoint into a student and the config that trains it."""

from .convert import (
    IMAGE_FOLDER,
    convert_to_student,
    dataset_classes,
    image_folder_classes,
    recipe_datasets,
    resolve_operator,
)
from .student import (
    add_init_arguments,
    fill_teacher_checkpoint,
    init_student,
    save_student,
)

__all__ = [
    'IMAGE_FOLDER',
    'dataset_classes',
    'image_folder_classes',
    'add_init_arguments',
    'convert_to_student',
    'fill_teacher_checkpoint',
    'init_student',
    'recipe_datasets',
    'resolve_operator',
    'save_student',
]
