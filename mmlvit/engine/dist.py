"""Distributed runs without GPUs.

mmengine 0.10.7's ``init_dist`` always calls ``torch.cuda.set_device``, so a
``torchrun`` launch on a CPU-only machine fails before training starts. Here
the process group is created with gloo first; mmengine then finds it
initialised. Its default DDP wrapper passes ``device_ids=[LOCAL_RANK]``,
which DDP rejects for CPU modules, so the wrapper is configured without.
"""

import torch
import torch.distributed as torch_dist


def init_cpu_distributed(cfg):
    """Start gloo process groups for a CPU-only ``--launcher pytorch`` run.

    Does nothing when CUDA is available or the launcher is not 'pytorch'
    (mmengine handles those). Sets ``cfg.env_cfg.dist_cfg.backend='gloo'``
    and, unless the config has one, a CPU ``model_wrapper_cfg``.
    """
    if cfg.get('launcher', 'none') != 'pytorch' or torch.cuda.is_available():
        return
    cfg.env_cfg.setdefault('dist_cfg', {})['backend'] = 'gloo'
    cfg.setdefault(
        'model_wrapper_cfg',
        dict(
            type='MMDistributedDataParallel',
            device_ids=None,
            find_unused_parameters=cfg.get('find_unused_parameters', False),
        ),
    )
    if not torch_dist.is_initialized():
        torch_dist.init_process_group(backend='gloo')
