"""Data transforms mmpretrain lacks (registered in its TRANSFORMS)."""

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmpretrain.registry import TRANSFORMS


@TRANSFORMS.register_module()
class MatchChannels(BaseTransform):
    """Give ``results['img']`` the channels the model takes.

    A grey model's dataset yields (H, W) arrays, but an image file read in
    colour (as mmpretrain's inferencer reads a path) is (H, W, 3) BGR; a
    colour model may be handed a grey image. ``channels=1``: (H, W, 3) BGR
    -> (H, W) grey (mmcv's BGR weights), (H, W, 1) -> (H, W), (H, W) as it
    is. ``channels=3``: (H, W) or (H, W, 1) -> (H, W, 3) copies, (H, W, 3)
    as it is.

    Args:
        channels (int): 1 or 3.
    """

    def __init__(self, channels: int) -> None:
        if channels not in (1, 3):
            raise ValueError(f'channels must be 1 or 3, got {channels}.')
        self.channels = channels

    def transform(self, results: dict) -> dict:
        img = results['img']
        have = 1 if img.ndim == 2 else img.shape[2]
        if have not in (1, 3):
            raise ValueError(
                f'MatchChannels takes (H, W), (H, W, 1) or (H, W, 3) '
                f'images, got shape {img.shape}.'
            )
        if self.channels == 1:
            if have == 3:
                img = mmcv.bgr2gray(img)
            elif img.ndim == 3:
                img = img[..., 0]
        elif have == 1:
            grey = img if img.ndim == 2 else img[..., 0]
            img = np.repeat(grey[..., None], 3, axis=2)
        results['img'] = img
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(channels={self.channels})'
