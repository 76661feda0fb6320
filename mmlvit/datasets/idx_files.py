"""Check the IDX files that mmpretrain's MNIST and FashionMNIST read.

mmpretrain reads ``{train,t10k}-{images-idx3,labels-idx1}-ubyte`` under
``data_root`` with bare assertions and a reshape: a truncated image file
fails with ``RuntimeError: shape '[60000, 28, 28]' is invalid for input of
size 999984`` and a text file with an ``AssertionError``, neither naming the
file. :func:`idx_problems` reads the headers (and the labels) and says what
is wrong with which file: another format (wrong magic number, a gzip file
that was not extracted), truncated or too long, image and label counts that
differ, labels outside the classes.
"""

import os
import os.path as osp
import struct

IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
GZIP_MAGIC = b'\x1f\x8b'


def idx_files(split):
    """The image and label file names of a split ('train' or 'test')."""
    prefix = 'train' if split == 'train' else 't10k'
    return f'{prefix}-images-idx3-ubyte', f'{prefix}-labels-idx1-ubyte'


def _header(path, magic, dims, what):
    """(problem, counts) of an IDX file's header."""
    size = os.path.getsize(path)
    with open(path, 'rb') as file:
        head = file.read(4 + 4 * dims)
    if head[:2] == GZIP_MAGIC:
        return (
            f'{path} is gzip-compressed: extract it (gunzip) so that the '
            'raw IDX file is there'
        ), None
    if len(head) < 4 + 4 * dims:
        return (
            f'{path} is {size} bytes, shorter than the {4 + 4 * dims}-byte '
            f'header of an IDX {what} file: it is truncated or empty'
        ), None
    found = struct.unpack('>I', head[:4])[0]
    if found != magic:
        return (
            f'{path} is not an IDX {what} file: its magic number is '
            f'0x{found:08x}, expected 0x{magic:08x} (first bytes '
            f'{head[:8]!r})'
        ), None
    counts = struct.unpack(f'>{dims}I', head[4:])
    payload = 1
    for count in counts:
        payload *= count
    expected = 4 + 4 * dims + payload
    if size != expected:
        shape = 'x'.join(map(str, counts[1:])) or '1 byte'
        state = 'truncated' if size < expected else 'longer than that'
        return (
            f'{path} is {size:,} bytes, but its header announces '
            f'{counts[0]:,} {what}s of {shape} ({expected:,} bytes): it is '
            f'{state}'
        ), None
    return None, counts


def idx_problems(root, split, num_classes=10):
    """What is wrong with the IDX files of ``split`` under ``root`` (one
    message per problem, each naming the file; empty when they are sound;
    missing files are left to the caller)."""
    images_name, labels_name = idx_files(split)
    images, labels = osp.join(root, images_name), osp.join(root, labels_name)
    if not (osp.isfile(images) and osp.isfile(labels)):
        return []
    problems = []
    image_problem, image_counts = _header(images, IMAGES_MAGIC, 3, 'image')
    label_problem, label_counts = _header(labels, LABELS_MAGIC, 1, 'label')
    problems += [p for p in (image_problem, label_problem) if p]
    if image_counts and label_counts:
        if image_counts[0] != label_counts[0]:
            problems.append(
                f'{images} holds {image_counts[0]:,} images but {labels} '
                f'{label_counts[0]:,} labels'
            )
        with open(labels, 'rb') as file:
            values = file.read()[8:]
        if values and max(values) >= num_classes:
            index = next(i for i, v in enumerate(values) if v >= num_classes)
            problems.append(
                f'{labels}: label {values[index]} of image {index} is outside '
                f'0..{num_classes - 1}'
            )
    return problems
