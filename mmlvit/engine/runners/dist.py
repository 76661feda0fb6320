"""Distributed runs: CPU-only process groups and the collective timeout.

mmengine 0.10.7's ``init_dist`` always calls ``torch.cuda.set_device``, so a
``torchrun`` launch on a CPU-only machine fails before training starts. Here
the process group is created with gloo first; mmengine then finds it
initialised. Its default DDP wrapper passes ``device_ids=[LOCAL_RANK]``,
which DDP rejects for CPU modules, so the wrapper is configured without.

``env_cfg.dist_cfg.timeout`` (seconds, as mmengine's ``init_dist`` takes it)
bounds how long a collective (gradient all-reduce, barrier, broadcast) waits
for the other ranks. mmengine passes it to the process group on GPU; here it
is passed on CPU too. When it expires, :func:`explain_collective_timeout`
turns the backend's message into one that says what happened.
"""

import contextlib
import datetime
import re

import torch
import torch.distributed as torch_dist

from .fsdp import is_fsdp_strategy

# Texts of gloo's and NCCL's timeout errors (torch 2.x).
_TIMEOUT_PATTERN = re.compile(
    r'timed out|timeout|watchdog caught collective', re.IGNORECASE
)


class CollectiveTimeoutError(RuntimeError):
    """A collective operation did not complete within the configured
    timeout: another rank is hung, stopped or unreachable."""


def collective_timeout(cfg):
    """``env_cfg.dist_cfg.timeout`` in seconds, or None (torch's default:
    30 minutes for gloo, 10 for NCCL)."""
    dist_cfg = (cfg.get('env_cfg') or {}).get('dist_cfg') or {}
    return dist_cfg.get('timeout')


def init_cpu_distributed(cfg):
    """Start gloo process groups for a CPU-only ``--launcher pytorch`` run.

    Does nothing when CUDA is available or the launcher is not 'pytorch'
    (mmengine handles those). Sets ``cfg.env_cfg.dist_cfg.backend='gloo'``
    and, unless the config has one, a CPU ``model_wrapper_cfg`` (for
    FSDP, a CPU wrapper in its ``strategy``); the group uses
    ``env_cfg.dist_cfg.timeout`` (seconds) when the config sets it.
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
    place_strategy_on_cpu(cfg.get('strategy'))
    if not torch_dist.is_initialized():
        kwargs = {}
        timeout = collective_timeout(cfg)
        if timeout is not None:
            kwargs['timeout'] = datetime.timedelta(seconds=timeout)
        torch_dist.init_process_group(backend='gloo', **kwargs)


def place_strategy_on_cpu(strategy):
    """Make a FlexibleRunner's FSDP wrapper build on the CPU.

    mmengine's FSDPStrategy hands the wrapper the local rank as its CUDA
    device (``device_id``), which fails without a GPU ("Found no NVIDIA
    driver"). A device the config names is kept.
    """
    if not is_fsdp_strategy(strategy):
        return
    strategy.setdefault(
        'model_wrapper', dict(type='MMFullyShardedDataParallel')
    )
    # A ConfigDict stores a copy of what setdefault is given: read it back.
    strategy['model_wrapper'].setdefault('device_id', 'cpu')


@contextlib.contextmanager
def explain_collective_timeout(cfg):
    """Re-raise a distributed timeout as :class:`CollectiveTimeoutError`,
    naming the rank, the bound and what to do."""
    try:
        yield
    except RuntimeError as err:
        if not (
            torch_dist.is_available()
            and torch_dist.is_initialized()
            and _TIMEOUT_PATTERN.search(str(err))
        ):
            raise
        timeout = collective_timeout(cfg)
        bound = (
            f'env_cfg.dist_cfg.timeout={timeout} s'
            if timeout is not None
            else "torch's default timeout (env_cfg.dist_cfg.timeout unset)"
        )
        raise CollectiveTimeoutError(
            f'Rank {torch_dist.get_rank()} of {torch_dist.get_world_size()}: '
            f'a collective operation did not complete within {bound}: '
            'another worker is hung, stopped or unreachable. Look at the '
            "other ranks' logs and processes; if a step legitimately takes "
            'longer, raise env_cfg.dist_cfg.timeout. '
            f'({type(err).__name__}: {str(err).splitlines()[0]})'
        ) from err
