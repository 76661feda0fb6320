"""A trained classifier as one module from image pixels to class scores."""

import copy

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.runner import load_checkpoint
from mmpretrain.registry import MODELS

from .inference_config import classifier_config


def load_classifier(config, checkpoint=None, cfg_options=None):
    """Build the classifier of a config (a distiller's student) on the CPU
    in eval mode and load a checkpoint into it.

    Args:
        config (Config | str): mmpretrain-style config or its path.
        checkpoint (str, optional): Classifier (or student) checkpoint.
            Without one the weights are the modules' construction-time
            init (enough for timing and export checks).
        cfg_options (dict, optional): Overrides merged into the config
            before the classifier is taken from it (so a distiller's
            student is ``model.student.*``).

    Returns:
        tuple: (ImageClassifier, Config of the classifier).
    """
    if isinstance(config, str):
        config = Config.fromfile(config)
    if cfg_options:
        config = copy.deepcopy(config)
        config.merge_from_dict(cfg_options)
    cfg = classifier_config(config)
    cfg.model.setdefault('data_preprocessor', cfg.get('data_preprocessor'))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg.model)
    if checkpoint is not None:
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    return model.eval(), cfg


class DeployableClassifier(nn.Module):
    """images -> class scores, the preprocessing inside.

    Computes what mmpretrain's ``predict`` gives as ``pred_score`` for a
    batch that has passed the config's test pipeline: the data
    preprocessor's BGR -> RGB flip (``to_rgb``, 3-channel input) and
    normalisation, the classifier and a softmax over the head's logits.

    Args:
        classifier (ImageClassifier): A single-label classifier in eval
            mode, with a ``ClsDataPreprocessor``-like ``data_preprocessor``.

    Forward:
        images (Tensor): (B, C, H, W) float pixels (0-255), in the channel
            order the test pipeline yields (BGR for colour images read by
            mmcv).

        Returns (Tensor): (B, num_classes) scores summing to 1.
    """

    def __init__(self, classifier):
        super().__init__()
        self.classifier = classifier
        pre = classifier.data_preprocessor
        self.to_rgb = bool(getattr(pre, 'to_rgb', False))
        self.normalize = bool(getattr(pre, '_enable_normalize', False))
        if self.normalize:
            self.register_buffer('mean', pre.mean.clone(), persistent=False)
            self.register_buffer('std', pre.std.clone(), persistent=False)
        self.eval()

    def logits(self, images):
        """(B, C, H, W) pixels as :meth:`forward` takes them ->
        (B, num_classes) logits, the head's output before the softmax."""
        x = images
        if self.to_rgb and x.shape[1] == 3:
            x = x.flip(1)
        if self.normalize:
            x = (x - self.mean) / self.std
        return self.classifier(x, mode='tensor')

    def forward(self, images):
        return torch.softmax(self.logits(images), dim=-1)
