"""MatchChannels gives an image the model's channels: grey <-> BGR."""

import mmcv
import numpy as np
import pytest

from mmlvit.datasets import MatchChannels


def test_colour_to_grey_and_grey_to_colour():
    rng = np.random.default_rng(0)
    bgr = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    grey = MatchChannels(1)(dict(img=bgr.copy()))['img']
    assert grey.shape == (5, 7)
    np.testing.assert_array_equal(grey, mmcv.bgr2gray(bgr))
    # A grey image stays as it is for a grey model; (H, W, 1) is squeezed.
    plain = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    assert MatchChannels(1)(dict(img=plain))['img'] is plain
    squeezed = MatchChannels(1)(dict(img=plain[..., None]))['img']
    np.testing.assert_array_equal(squeezed, plain)
    colour = MatchChannels(3)(dict(img=plain))['img']
    assert colour.shape == (5, 7, 3)
    for c in range(3):
        np.testing.assert_array_equal(colour[..., c], plain)
    assert MatchChannels(3)(dict(img=bgr))['img'] is bgr


def test_bad_channels_are_named():
    with pytest.raises(ValueError, match='channels must be 1 or 3, got 2'):
        MatchChannels(2)
    with pytest.raises(ValueError, match=r'got shape \(5, 7, 4\)'):
        MatchChannels(1)(dict(img=np.zeros((5, 7, 4), np.uint8)))
