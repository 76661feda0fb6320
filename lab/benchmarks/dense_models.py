"""Dense models (MMSegmentation / MMDetection) for the benchmarks: built
from a config with a chosen backbone attention, random weights, and one
training or inference call on a square image with synthetic targets."""

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import DefaultScope
from torch.nn.modules.batchnorm import _BatchNorm

from .options import autocast


def scope_registry(scope):
    """The ``MODELS`` registry of ``'mmseg'`` or ``'mmdet'``, with that
    package's models registered (import it before forking the cases)."""
    if scope == 'mmseg':
        import mmseg.models  # noqa: F401
        from mmseg.registry import MODELS
    else:
        import mmdet.models  # noqa: F401
        from mmdet.registry import MODELS
    return MODELS


def build_dense_model(config, scope, operator, cfg_options=None):
    """The model of ``config`` with every backbone block's attention
    ``operator``, random weights, SyncBN reverted to BN.

    UperNet (``scope='mmseg'``) runs on the whole image
    (``test_cfg.mode='whole'``, not a sliding window, which would hide the
    token count from the backbone); Mask R-CNN keeps ``max_per_img``
    detections whatever their score (``test_cfg.rcnn.score_thr=0``), so
    that its mask head does the same work for every backbone.

    Args:
        config (str): A config file whose model has a
            ``LinearVisionTransformer`` backbone.
        scope (str): 'mmseg' or 'mmdet'.
        operator (str): A registered attention operator.
        cfg_options (dict, optional): Dotted config keys -> values, merged
            into the config (e.g. a smaller backbone arch for tests).
    """
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(cfg_options or {})
    cfg.model.backbone.attn_cfg = dict(type=operator)
    if scope == 'mmseg':
        cfg.model.test_cfg = dict(mode='whole')
    else:
        cfg.model.test_cfg.rcnn.score_thr = 0.0
    MODELS = scope_registry(scope)
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(cfg.model)
    return revert_sync_batchnorm(model)


def seg_samples(size, num_classes, generator):
    """One ``SegDataSample`` with a random (1, size, size) label map."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    shape = (size, size)
    sample = SegDataSample(
        metainfo=dict(img_shape=shape, ori_shape=shape, pad_shape=shape,
                      padding_size=[0, 0, 0, 0])
    )  # fmt: skip
    labels = torch.randint(num_classes, (1, *shape), generator=generator)
    sample.gt_sem_seg = PixelData(data=labels)
    return [sample]


def det_samples(size, num_classes, generator, num_boxes=5):
    """One ``DetDataSample`` with ``num_boxes`` random boxes (5-50 % of the
    image side), labels and box-shaped ``BitmapMasks`` (n, size, size)."""
    import numpy as np
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    shape = (size, size)
    sample = DetDataSample(
        metainfo=dict(img_shape=shape, ori_shape=shape, pad_shape=shape,
                      batch_input_shape=shape, scale_factor=(1.0, 1.0))
    )  # fmt: skip
    wh = (0.05 + 0.45 * torch.rand(num_boxes, 2, generator=generator)) * size
    xy = torch.rand(num_boxes, 2, generator=generator) * (size - wh)
    boxes = torch.cat([xy, xy + wh], dim=1).floor()
    masks = np.zeros((num_boxes, size, size), dtype=np.uint8)
    for mask, (x0, y0, x1, y1) in zip(masks, boxes.int().tolist()):
        mask[y0:y1, x0:x1] = 1
    sample.gt_instances = InstanceData(
        bboxes=boxes,
        labels=torch.randint(num_classes, (num_boxes,), generator=generator),
        masks=BitmapMasks(masks, size, size),
    )
    return [sample]


def dense_step(model, scope, mode, size, device='cpu', dtype='fp32'):
    """The call to time: ``train`` (loss with synthetic targets, backward;
    torch reseeded, so every call samples the same anchors and RoIs) or
    ``inference`` (predict, no grad) on a (1, 3, size, size) image that
    skips the data preprocessor, under autocast of ``dtype``. BatchNorm
    layers use their running statistics (UperNet's 1x1 pooled map cannot
    be normalised over a batch of one)."""
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(1, 3, size, size, generator=generator).to(device)
    if scope == 'mmseg':
        samples = seg_samples(size, model.num_classes, generator)
    else:
        num_classes = model.roi_head.bbox_head.num_classes
        samples = det_samples(size, num_classes, generator)
    samples = [sample.to(device) for sample in samples]

    def train():
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # the same sampled RoIs in every call
        with autocast(device, dtype):
            losses = model(images, samples, mode='loss')
        model.parse_losses(losses)[0].backward()

    def inference():
        with torch.no_grad(), autocast(device, dtype):
            model(images, samples, mode='predict')

    model.train(mode == 'train')
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.eval()
    return train if mode == 'train' else inference
