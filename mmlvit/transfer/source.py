"""The softmax checkpoint of a run, as one object read once.

A conversion run reads one softmax checkpoint for three purposes: the
distiller's frozen teacher, the student's init (``SoftmaxToLinearInitHook``)
and the copied/fresh optimizer groups the init plans. A
:class:`SoftmaxCheckpoint` names the file and its layout and reads the
weights the first time one of them asks; the others receive the same
object (the distiller holds it as ``softmax_checkpoint``, see
:func:`softmax_checkpoint_of`), so the file is read once per run.
"""

import os.path as osp
from collections.abc import Mapping

import torch

from mmlvit.utils.model import unwrap_model

from .readers import FORMATS, load_softmax_checkpoint
from .shipped import shipped_path


class SoftmaxCheckpoint:
    """A softmax checkpoint file, read on first use and kept.

    Args:
        path (str): Any file :func:`load_softmax_checkpoint` reads (a
            relative path of a shipped file included).
        format (str): Its layout (``FORMATS``), or 'auto' (default) to
            detect it.
        img_size (int, optional): The image side of the models it feeds
            (a DINOv2 position table is resampled to it, see
            :func:`load_softmax_checkpoint`); the first reader with a model
            may set it (:meth:`fit_img_size`) before the file is read.

    Raises:
        ValueError: ``format`` is not one of ``FORMATS``.
    """

    def __init__(
        self, path: str, format: str = 'auto', img_size: int | None = None
    ) -> None:
        if format not in FORMATS:
            raise ValueError(
                f'Unknown checkpoint format {format!r}; choose from {FORMATS}.'
            )
        self.path = str(path)
        self.format = format
        self.img_size = img_size
        self._state_dict = None

    def fit_img_size(self, img_size: int | None) -> None:
        """Read the file for models of this image side, unless it is read
        already or a size is set."""
        if self._state_dict is None and self.img_size is None:
            self.img_size = img_size

    @property
    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """The weights in mmpretrain classifier keys (``backbone.*``,
        ``head.*``), read from the file the first time they are asked for.

        Raises:
            CheckpointError: The file cannot be read or has an unknown
                layout.
        """
        if self._state_dict is None:
            self._state_dict = load_softmax_checkpoint(
                self.path, self.format, self.img_size
            )
        return self._state_dict

    def release(self) -> None:
        """Drop the weights once the last reader has them (the file would
        be read again if they were asked for after this)."""
        self._state_dict = None

    def refers_to(self, path: str, format: str = 'auto') -> bool:
        """Whether ``path`` read as ``format`` is this checkpoint."""
        same_format = format in ('auto', self.format)
        return same_format and _real(path) == _real(self.path)

    def __repr__(self) -> str:
        return f'SoftmaxCheckpoint({self.path!r}, format={self.format!r})'


def _real(path):
    return osp.realpath(shipped_path(str(path)))


def backbone_img_size(model: torch.nn.Module) -> int | None:
    """The image side a classifier's (or bare) ViT backbone is built for
    (``patch_embed.init_input_size``), or None."""
    backbone = getattr(model, 'backbone', model)
    size = getattr(
        getattr(backbone, 'patch_embed', None), 'init_input_size', None
    )
    return None if size is None else int(size[0])


def softmax_checkpoint_of(model: torch.nn.Module) -> SoftmaxCheckpoint | None:
    """The softmax checkpoint a model holds (a distiller's
    ``softmax_checkpoint``; DDP-style wrappers are unwrapped), or None."""
    return getattr(unwrap_model(model), 'softmax_checkpoint', None)
