"""mmengine's FSDP path (``runner_type='FlexibleRunner'``,
``strategy=dict(type='FSDPStrategy')``), made to resume under current torch.

Two mmengine 0.10.7 defects break ``--resume`` of an FSDP run:

- ``FSDPStrategy.load_optim_state_dict`` calls
  ``FSDP.optim_state_dict_to_load(state_dict, model, optimizer)``, torch
  2.0's argument order; torch >= 2.1 takes ``(model, optim,
  optim_state_dict)`` and fails with "unhashable type: 'dict'".
- ``FlexibleRunner.save_checkpoint`` overwrites the ``epoch``/``iter`` its
  caller put in ``meta`` (``Runner`` keeps them). CheckpointHook re-saves
  the epoch checkpoint after validation when ``save_best`` finds a new best,
  with the epoch counter already advanced, so ``epoch_N`` records epoch N+1
  and a resumed run skips an epoch.

The subclasses here fix both and are registered under mmengine's names, so
configs keep the names README gives once mmlvit is imported.
"""

import os
import os.path as osp

from mmengine.registry import RUNNERS, STRATEGIES
from mmengine.runner import FlexibleRunner as _MMEngineFlexibleRunner

from mmlvit.checkpoint.sharded import save_sharded

try:
    from mmengine._strategy import FSDPStrategy as _MMEngineFSDPStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
except ImportError:  # torch without distributed support
    _MMEngineFSDPStrategy = None


@RUNNERS.register_module(name='FlexibleRunner', force=True)
class FlexibleRunner(_MMEngineFlexibleRunner):
    """mmengine's ``FlexibleRunner`` whose checkpoints keep the ``epoch`` and
    ``iter`` the caller asked for, as ``Runner``'s do, and whose sharded
    checkpoint folders are written as a whole or not at all
    (:mod:`mmlvit.checkpoint.sharded`)."""

    def save_checkpoint(self, out_dir, filename, *args, meta=None, **kwargs):
        """As ``FlexibleRunner.save_checkpoint``; ``meta['epoch']`` and
        ``meta['iter']``, when given, are written as given and left so in
        ``meta``."""
        meta = {} if meta is None else meta
        requested = {k: meta[k] for k in ('epoch', 'iter') if k in meta}
        strategy = self.strategy

        def save(filename, *, extra_ckpt, **save_kwargs):
            extra_ckpt['meta'].update(requested)

            def write(target):
                type(strategy).save_checkpoint(
                    strategy, target, extra_ckpt=extra_ckpt, **save_kwargs
                )

            if writes_shards(strategy) and '://' not in filename:
                save_sharded(write, filename)
            else:
                write(filename)

        strategy.save_checkpoint = save
        try:
            super().save_checkpoint(
                out_dir, filename, *args, meta=meta, **kwargs
            )
        finally:
            del strategy.save_checkpoint
            meta.update(requested)


if _MMEngineFSDPStrategy is not None:

    @STRATEGIES.register_module(name='FSDPStrategy', force=True)
    class FSDPStrategy(_MMEngineFSDPStrategy):
        """mmengine's ``FSDPStrategy`` with optimizer-state loading that
        works under torch >= 2.1."""

        def load_optim_state_dict(self, state_dict):
            """Load a (sharded or full) optimizer state saved by
            :meth:`optim_state_dict` into the wrapped optimizer."""
            optim_state_dict = FSDP.optim_state_dict_to_load(
                model=self.model,
                optim=self.optim_wrapper.optimizer,
                optim_state_dict=state_dict,
            )
            self.optim_wrapper.load_state_dict(optim_state_dict)


def writes_shards(strategy):
    """Whether a built strategy saves one file per process (FSDP with
    mmengine's default ``state_dict_cfg='local'``)."""
    return (
        _MMEngineFSDPStrategy is not None
        and isinstance(strategy, _MMEngineFSDPStrategy)
        and not strategy._is_full_state_dict()
    )


def is_fsdp_strategy(strategy):
    """Whether a config's ``strategy`` (dict or None) is the FSDP one,
    under any registry scope prefix."""
    kind = (strategy or {}).get('type', '')
    return kind.split('.')[-1] == 'FSDPStrategy'


def sharded_checkpoint_ranks(path):
    """The number of ``rank{i}.pth`` shards in an FSDP checkpoint folder
    (mmengine's default ``state_dict_cfg='local'``), or 0 when ``path`` is
    not such a folder."""
    if not osp.isdir(path):
        return 0
    ranks = 0
    while osp.isfile(osp.join(path, f'rank{ranks}.pth')):
        ranks += 1
    return ranks


def check_sharded_checkpoint(cfg, path):
    """Fail early, with the command that works, when ``path`` is a sharded
    FSDP checkpoint that this run cannot read: a config without the FSDP
    strategy, or a process count other than the number of shards.

    Raises:
        ValueError: The checkpoint cannot be read by this run.
    """
    ranks = sharded_checkpoint_ranks(path)
    if not ranks:
        return
    world_size = int(os.environ.get('WORLD_SIZE', '1'))
    if cfg.get('launcher', 'none') == 'none':
        world_size = 1
    if not is_fsdp_strategy(cfg.get('strategy')):
        problem = 'the config does not use the FSDP strategy'
    elif world_size != ranks:
        problem = f'this run has {world_size} process(es)'
    else:
        return
    raise ValueError(
        f'{path} is a sharded FSDP checkpoint (one file per process, '
        f'rank0.pth to rank{ranks - 1}.pth), but {problem}. Read it with '
        "the config that wrote it (runner_type='FlexibleRunner', "
        "strategy=dict(type='FSDPStrategy')) and as many processes as "
        f'shards, e.g. bash tools/dist_test.sh CONFIG {path} {ranks}.'
    )
