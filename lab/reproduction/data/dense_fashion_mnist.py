"""Dense Fashion-MNIST: grey canvases of several occluding Fashion-MNIST
items, with semantic masks and COCO instance annotations.

A small, deterministic data set for semantic segmentation (MMSegmentation's
``BaseSegDataset``) and instance segmentation / detection (MMDetection's
``CocoDataset``), built offline from the extracted Fashion-MNIST IDX files
in a few seconds. Layout under ``out_root``::

    images/{train,test}/NNNNN.png      uint8 grey canvases (H, W)
    masks/{train,test}/NNNNN.png       uint8 class index per pixel:
                                       0 background, 1..10 the classes
    annotations/instances_{train,test}.json
                                       COCO: one instance per visible item,
                                       mask as compressed RLE
    meta.json                          the settings; written last

Each canvas holds 2-5 items drawn from the split's images (train canvases
from the 60,000 train images, test canvases from the 10,000 t10k images),
each rescaled (bilinear) by a random factor and pasted at a random position.
An item's pixels are its foreground, the resized pixels brighter than
``threshold``; later items cover earlier ones. An item left with fewer than
``min_area`` visible pixels is removed from the canvas (image, mask and
annotations), and the canvas is drawn again without it. docs/dense_data.md
describes the data set.

Only numpy and PIL are imported here (and in :mod:`.canvas`, which draws
one canvas); the IDX reader (mmpretrain's) and pycocotools are imported by
the functions that use them.
"""

import json
import os
import os.path as osp
import shutil
import warnings

import numpy as np
from PIL import Image

from .canvas import ITEM_SIZE, coco_instances, make_canvas, semantic_mask

# Fashion-MNIST's classes in label order; class ``i`` has mask value
# ``i + 1`` and COCO category id ``i + 1``.
CLASSES = (
    'T-shirt/top',
    'Trouser',
    'Pullover',
    'Dress',
    'Coat',
    'Sandal',
    'Shirt',
    'Sneaker',
    'Bag',
    'Ankle boot',
)
SEG_CLASSES = ('background',) + CLASSES

SPLITS = {'train': 'train', 'test': 't10k'}
FORMAT_VERSION = 1
META_FILE = 'meta.json'


def read_fashion_mnist(fashion_mnist_root, split):
    """The images and labels of one split of the extracted IDX files.

    Parameters
    ----------
    fashion_mnist_root : str
        Folder of the four extracted IDX files
        (tools/data/prepare_fashion_mnist.py makes it).
    split : str
        ``'train'`` (60,000 images) or ``'test'`` (the 10,000 t10k images).

    Returns
    -------
    images : np.ndarray
        uint8, shape (N, 28, 28).
    labels : np.ndarray
        int64, shape (N,), class indices 0..9.
    """
    from mmpretrain.datasets.mnist import read_image_file, read_label_file

    prefix = osp.join(fashion_mnist_root, SPLITS[split])
    with warnings.catch_warnings():
        # The reader wraps the read-only file buffer in a tensor.
        warnings.simplefilter('ignore', UserWarning)
        images = read_image_file(prefix + '-images-idx3-ubyte').numpy()
        labels = read_label_file(prefix + '-labels-idx1-ubyte').numpy()
    return images.copy(), labels.copy()


def _settings(
    num_train=1000,
    num_test=200,
    canvas=128,
    seed=0,
    items=(2, 5),
    scale=(1.0, 2.5),
    threshold=16,
    min_area=20,
):
    """The arguments that determine the files (those of
    :func:`make_dense_fashion_mnist`, with its defaults), checked, as
    meta.json records them."""
    settings = dict(
        format_version=FORMAT_VERSION,
        num_train=int(num_train),
        num_test=int(num_test),
        canvas=int(canvas),
        seed=int(seed),
        items=[int(v) for v in items],
        scale=[float(v) for v in scale],
        threshold=int(threshold),
        min_area=int(min_area),
    )
    lo, hi = settings['items']
    if not 1 <= lo <= hi:
        raise ValueError(
            f'items must be (min, max) with 1 <= min <= max, got {items}'
        )
    s_lo, s_hi = settings['scale']
    if not 0 < s_lo <= s_hi:
        raise ValueError(
            f'scale must be (min, max) with 0 < min <= max, got {scale}'
        )
    largest = int(round(ITEM_SIZE * s_hi))
    if settings['canvas'] < largest:
        raise ValueError(
            f'canvas ({canvas} px) is smaller than the largest '
            f'item ({largest} px at scale {s_hi})'
        )
    if settings['num_train'] < 0 or settings['num_test'] < 0:
        raise ValueError('num_train and num_test must be >= 0')
    return settings


def _save_png(array, path):
    # PIL writes no time stamp into a PNG unless given one: same array, same
    # bytes.
    Image.fromarray(array).save(path, format='PNG')


def _write_json(obj, path):
    with open(path + '.part', 'w') as f:
        json.dump(obj, f, sort_keys=True, separators=(',', ':'))
    os.replace(path + '.part', path)


def read_meta(out_root):
    """The contents of ``out_root``'s meta.json, or None if it is absent or
    unreadable (an interrupted or foreign folder)."""
    path = osp.join(out_root, META_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _png_count(folder):
    """The number of PNG files in ``folder``, -1 if it does not exist."""
    if not osp.isdir(folder):
        return -1
    return sum(name.endswith('.png') for name in os.listdir(folder))


def is_complete(out_root, **settings):
    """Whether ``out_root`` holds a complete set made with these settings
    (the keyword arguments of :func:`make_dense_fashion_mnist`, with its
    defaults): meta.json records them and every image, mask and annotation
    file is present."""
    settings = _settings(**settings)
    meta = read_meta(out_root)
    if meta is None or meta.get('settings') != settings:
        return False
    for split in SPLITS:
        number = settings[f'num_{split}']
        if any(
            _png_count(osp.join(out_root, folder, split)) != number
            for folder in ('images', 'masks')
        ):
            return False
        if not osp.isfile(
            osp.join(out_root, 'annotations', f'instances_{split}.json')
        ):
            return False
    return True


def make_dense_fashion_mnist(fashion_mnist_root, out_root, **settings):
    """Write the dense data set (layout in the module docstring).

    The same arguments give byte-identical files. Canvas ``i`` of a split
    depends only on ``seed``, the split and ``i``, so a smaller set is a
    prefix of a larger one. The folders ``images/``, ``masks/`` and
    ``annotations/`` of ``out_root`` are emptied first and meta.json is
    written last: a folder without meta.json is incomplete.

    Parameters
    ----------
    fashion_mnist_root : str
        Folder of the extracted Fashion-MNIST IDX files.
    out_root : str
        Output folder (created if missing).
    num_train, num_test : int, keyword-only
        Canvases per split. Defaults to 1000 and 200.
    canvas : int
        Side of the square canvases in pixels. Defaults to 128; at least the
        largest item (``28 * scale[1]``, rounded).
    seed : int
        Seed of the random draws. Defaults to 0.
    items : (int, int)
        Fewest and most items drawn per canvas (inclusive). Defaults to
        (2, 5); items removed for too small a visible area can leave fewer.
    scale : (float, float)
        Range of the uniform scale factor of the 28 px items. Defaults to
        (1.0, 2.5).
    threshold : int
        An item's foreground is its resized pixels brighter than this.
        Defaults to 16.
    min_area : int
        Items with fewer visible pixels are removed. Defaults to 20.

    Returns
    -------
    dict
        The contents of meta.json: ``settings`` (the arguments but the
        source folder), ``classes`` and per split the number of ``images``
        and ``instances``.
    """
    settings = _settings(**settings)
    canvas = settings['canvas']
    os.makedirs(out_root, exist_ok=True)
    meta_path = osp.join(out_root, META_FILE)
    if osp.exists(meta_path):
        os.remove(meta_path)
    for folder in ('images', 'masks', 'annotations'):
        shutil.rmtree(osp.join(out_root, folder), ignore_errors=True)
    os.makedirs(osp.join(out_root, 'annotations'))

    counts = {}
    for split_code, split in enumerate(SPLITS):
        number = settings[f'num_{split}']
        images, labels = read_fashion_mnist(fashion_mnist_root, split)
        image_dir = osp.join(out_root, 'images', split)
        mask_dir = osp.join(out_root, 'masks', split)
        os.makedirs(image_dir)
        os.makedirs(mask_dir)
        digits = max(5, len(str(max(number - 1, 0))))
        coco_images, annotations = [], []
        for i in range(number):
            rng = np.random.default_rng([settings['seed'], split_code, i])
            image, owner, item_labels = make_canvas(
                rng, images, labels, settings
            )
            name = f'{i:0{digits}d}.png'
            _save_png(image, osp.join(image_dir, name))
            _save_png(
                semantic_mask(owner, item_labels), osp.join(mask_dir, name)
            )
            coco_images.append(
                dict(id=i + 1, file_name=name, height=canvas, width=canvas)
            )
            annotations += coco_instances(
                owner, item_labels, i + 1, len(annotations) + 1
            )
        _write_json(
            dict(
                images=coco_images,
                annotations=annotations,
                categories=[
                    dict(id=c + 1, name=name, supercategory='fashion')
                    for c, name in enumerate(CLASSES)
                ],
            ),
            osp.join(out_root, 'annotations', f'instances_{split}.json'),
        )
        counts[split] = dict(images=number, instances=len(annotations))

    meta = dict(settings=settings, classes=list(CLASSES), splits=counts)
    _write_json(meta, meta_path)
    return meta
