"""Synthetic batches for segmentors and detectors, preprocessed by the
model's own data preprocessor (imported by the dense tests)."""

import torch
from mmengine.structures import InstanceData, PixelData


def seg_batch(model, size=2, hw=64, channels=3, num_classes=3, seed=0):
    """A preprocessed mmseg training batch: random images (0-255) and
    random per-pixel labels in [0, num_classes).

    Returns:
        tuple: (Tensor (size, channels, hw, hw), list[SegDataSample]).
    """
    from mmseg.structures import SegDataSample

    gen = torch.Generator().manual_seed(seed)
    images, samples = [], []
    for _ in range(size):
        images.append(torch.randint(0, 255, (channels, hw, hw), generator=gen))
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(
            data=torch.randint(0, num_classes, (1, hw, hw), generator=gen)
        )
        sample.set_metainfo(dict(img_shape=(hw, hw), ori_shape=(hw, hw)))
        samples.append(sample)
    data = model.data_preprocessor(
        dict(inputs=images, data_samples=samples), training=True
    )
    return data['inputs'], data['data_samples']


def det_batch(model, size=2, hw=64, channels=3, seed=0):
    """A preprocessed mmdet training batch: random images (0-255), each with
    two boxes of classes 0 and 2 and their rectangular masks.

    Returns:
        tuple: (Tensor (size, channels, H, W), list[DetDataSample]).
    """
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks

    gen = torch.Generator().manual_seed(seed)
    boxes = torch.tensor([[0.06, 0.12, 0.47, 0.62], [0.3, 0.47, 0.97, 0.94]])
    boxes = (boxes * hw).round()
    images, samples = [], []
    for _ in range(size):
        images.append(torch.randint(0, 255, (channels, hw, hw), generator=gen))
        masks = torch.zeros(len(boxes), hw, hw, dtype=torch.uint8)
        for mask, (x0, y0, x1, y1) in zip(masks, boxes.int().tolist()):
            mask[y0:y1, x0:x1] = 1
        instances = InstanceData(
            bboxes=boxes.clone(),
            labels=torch.tensor([0, 2]),
            masks=BitmapMasks(masks.numpy(), hw, hw),
        )
        sample = DetDataSample(gt_instances=instances)
        sample.set_metainfo(
            dict(
                img_shape=(hw, hw), ori_shape=(hw, hw), scale_factor=(1.0, 1.0)
            )
        )
        samples.append(sample)
    data = model.data_preprocessor(
        dict(inputs=images, data_samples=samples), training=True
    )
    return data['inputs'], data['data_samples']
