"""What every grid's tables share: statistics over seeds, differences in
pooled standard deviations, the text of a table cell, the line naming the
teacher."""

import math


def mean_std(values) -> tuple:
    """Mean and sample std (0 for one value) of ``values``, in float32 as
    the committed tables were computed."""
    import torch

    t = torch.tensor(values, dtype=torch.float32)
    std = t.std().item() if len(values) > 1 else 0.0
    return t.mean().item(), std


def gain(cell, reference):
    """``cell.mean - reference.mean`` and that difference in units of the
    two cells' pooled std (None when both stds are 0)."""
    delta = cell.mean - reference.mean
    pooled = math.sqrt((cell.std**2 + reference.std**2) / 2)
    return delta, (delta / pooled if pooled > 0 else None)


def cell(summary) -> str:
    """A table cell: ``mean +- std (seeds)``, or ``mean (1)`` for one seed;
    ``summary`` has ``mean``, ``std`` and the seed count ``n``."""
    if summary.n > 1:
        return f'{summary.mean:.2f} +- {summary.std:.2f} ({summary.n})'
    return f'{summary.mean:.2f} (1)'


def teacher_line(path: str) -> str:
    """One line naming the teacher checkpoint and the Fashion-MNIST test
    top-1 recorded in it when it was trained (or saying there is none)."""
    from mmlvit.checkpoint import load_checkpoint_file

    meta = load_checkpoint_file(path).get('meta') or {}
    top1 = meta.get('fashion_mnist_test_top1')
    recorded = (
        f'{top1:.2f}% on the Fashion-MNIST test split (recorded when it '
        'was trained)'
        if top1 is not None
        else 'no recorded accuracy'
    )
    return f'Teacher: {path}: {recorded}'
