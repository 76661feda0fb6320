"""One of the two gloo processes of test_skip_nonfinite.py's distributed
check: for each skipping wrapper, a DDP linear model makes three updates
with a NaN input on rank 1 only in the second; the weights after each
update go to OUT_JSON as {wrapper type: [[w, ...], ...]}.

Usage: MASTER_ADDR=127.0.0.1 MASTER_PORT=P python nonfinite_ddp_worker.py
RANK OUT_JSON
"""

import json
import math
import sys
from datetime import timedelta

import torch
import torch.distributed as torch_dist
from mmpretrain.registry import OPTIM_WRAPPERS
from torch.nn.parallel import DistributedDataParallel

import mmlvit.engine.optimizers.skip_nonfinite  # noqa: F401  (registers the wrappers)

WRAPPERS = ('SkipNonFiniteOptimWrapper', 'SkipNonFiniteAmpOptimWrapper')


def updates(rank, wrapper_type):
    """The weights after each of three updates."""
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapper = OPTIM_WRAPPERS.build(
        dict(type=wrapper_type, optimizer=optimizer)
    )
    weights = []
    for step in range(3):
        x = torch.full((2, 4), float(rank + 1))
        if step == 1 and rank == 1:
            x[0, 0] = math.nan
        with wrapper.optim_context(model):
            loss = model(x).float().sum()
        wrapper.update_params(loss)
        weights.append(model.module.weight.detach().flatten().tolist())
    return weights


def main(rank, out):
    # The AMP wrapper on CPU autocasts to bfloat16 without a GradScaler:
    # its own checks stand between a NaN loss and the weights.
    torch_dist.init_process_group(
        'gloo', rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    results = {kind: updates(rank, kind) for kind in WRAPPERS}
    with open(out, 'w') as f:
        json.dump(results, f)
    torch_dist.destroy_process_group()


if __name__ == '__main__':
    main(int(sys.argv[1]), sys.argv[2])
