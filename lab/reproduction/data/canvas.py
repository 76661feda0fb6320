"""One canvas of Dense Fashion-MNIST (docs/dense_data.md): occluding
Fashion-MNIST items pasted on a grey canvas, its semantic mask and the COCO
annotations of its visible items.

Only numpy and PIL are imported here; pycocotools is imported by the
function that uses it.
"""

import numpy as np
from PIL import Image

# The side of a Fashion-MNIST image (px), scaled per item.
ITEM_SIZE = 28


def _paint(pieces, canvas):
    """Draw items in order, each covering the ones before it.

    Parameters
    ----------
    pieces : list of (np.ndarray, np.ndarray, int, int)
        Per item: its resized pixels (uint8, (h, w)), its foreground (bool,
        (h, w)) and its top-left corner (y, x) on the canvas.
    canvas : int
        Side of the square canvas.

    Returns
    -------
    image : np.ndarray
        uint8, (canvas, canvas).
    owner : np.ndarray
        int16, (canvas, canvas): index into ``pieces`` of the item seen at
        each pixel, -1 for background.
    """
    image = np.zeros((canvas, canvas), np.uint8)
    owner = np.full((canvas, canvas), -1, np.int16)
    for k, (pixels, fg, y, x) in enumerate(pieces):
        h, w = fg.shape
        image[y : y + h, x : x + w][fg] = pixels[fg]
        owner[y : y + h, x : x + w][fg] = k
    return image, owner


def make_canvas(rng, images, labels, settings):
    """One canvas of occluding items.

    Parameters
    ----------
    rng : np.random.Generator
        Draws the items, their scales and positions.
    images : np.ndarray
        uint8, (N, 28, 28): the split's items.
    labels : np.ndarray
        (N,): their classes 0..9.
    settings : dict
        ``canvas``, ``items``, ``scale``, ``threshold``, ``min_area`` (see
        :func:`~.dense_fashion_mnist.make_dense_fashion_mnist`).

    Returns
    -------
    image : np.ndarray
        uint8, (canvas, canvas).
    owner : np.ndarray
        int16, (canvas, canvas): the visible item's index into
        ``item_labels`` at each pixel, -1 for background. Every item has at
        least ``min_area`` visible pixels.
    item_labels : np.ndarray
        int64, (K,): the kept items' classes 0..9, in painting order.
    """
    canvas = settings['canvas']
    lo, hi = settings['items']
    count = int(rng.integers(lo, hi + 1))
    pieces, item_labels = [], []
    for _ in range(count):
        index = int(rng.integers(len(images)))
        size = int(round(ITEM_SIZE * rng.uniform(*settings['scale'])))
        pixels = np.asarray(
            Image.fromarray(images[index]).resize((size, size), Image.BILINEAR)
        )
        y, x = (int(v) for v in rng.integers(0, canvas - size + 1, size=2))
        pieces.append((pixels, pixels > settings['threshold'], y, x))
        item_labels.append(int(labels[index]))
    item_labels = np.asarray(item_labels, np.int64)

    image, owner = _paint(pieces, canvas)
    areas = np.bincount(owner[owner >= 0], minlength=count)
    keep = np.flatnonzero(areas >= settings['min_area'])
    if len(keep) < count:
        # Removing an item only uncovers pixels of the others, so every kept
        # item still has at least min_area visible pixels.
        image, owner = _paint([pieces[k] for k in keep], canvas)
        item_labels = item_labels[keep]
    return image, owner, item_labels


def semantic_mask(owner, item_labels):
    """Class index per pixel: 0 background, ``label + 1`` for an item.

    Parameters
    ----------
    owner : np.ndarray
        int, (H, W), item index or -1 (see :func:`make_canvas`).
    item_labels : np.ndarray
        (K,) classes 0..9.

    Returns
    -------
    np.ndarray
        uint8, (H, W), values 0..10.
    """
    lut = np.concatenate([[0], np.asarray(item_labels) + 1]).astype(np.uint8)
    return lut[owner.astype(np.int64) + 1]


def coco_instances(owner, item_labels, image_id, first_id):
    """COCO annotations of a canvas's visible items.

    Parameters
    ----------
    owner, item_labels : np.ndarray
        As in :func:`semantic_mask`.
    image_id : int
        The canvas's COCO image id.
    first_id : int
        The id of the first annotation; the others follow.

    Returns
    -------
    list of dict
        One per item, in painting order: ``segmentation`` (compressed RLE of
        the visible mask, ``counts`` as str), ``bbox`` ``[x, y, w, h]`` of
        the visible mask, ``area`` (its pixel count), ``category_id``
        (``label + 1``), ``iscrowd`` 0.
    """
    from pycocotools import mask as mask_utils

    annotations = []
    for k, label in enumerate(item_labels):
        visible = np.asfortranarray((owner == k).astype(np.uint8))
        rle = mask_utils.encode(visible)
        annotations.append(
            dict(
                id=first_id + k,
                image_id=image_id,
                category_id=int(label) + 1,
                segmentation=dict(
                    size=[int(v) for v in rle['size']],
                    counts=rle['counts'].decode('ascii'),
                ),
                area=int(visible.sum()),
                bbox=[float(v) for v in mask_utils.toBbox(rle)],
                iscrowd=0,
            )
        )
    return annotations
