"""mmengine Runners for tiny training runs built in the tests."""

from mmengine.runner import Runner


def iter_runner(
    model, work_dir, dataset, *, batch_size, collate, iters, optimizer, **cfg
):
    """A Runner that trains ``model`` for ``iters`` iterations on
    ``dataset`` in order (batches of ``batch_size`` joined by the collate
    function named ``collate``), in mmpretrain's scope and saving no
    checkpoint; ``cfg`` adds to the Runner's arguments (hooks, seed...)."""
    return Runner(
        model=model,
        work_dir=str(work_dir),
        train_dataloader=dict(
            dataset=dataset,
            sampler=dict(type='DefaultSampler', shuffle=False),
            batch_size=batch_size,
            collate_fn=dict(type=collate),
        ),
        train_cfg=dict(by_epoch=False, max_iters=iters),
        optim_wrapper=dict(optimizer=optimizer),
        default_hooks=dict(checkpoint=None),
        default_scope='mmpretrain',
        **cfg,
    )
