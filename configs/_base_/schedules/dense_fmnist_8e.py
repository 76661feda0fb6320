# The schedule of the small dense models on Dense Fashion-MNIST: AdamW lr
# 1e-3 (weight decay 0.05) with the non-finite-update guard, 1 warm-up epoch
# then cosine to 1e-6, 8 epochs (125 iterations each at batch 8), evaluated
# every 2 epochs.
optim_wrapper = dict(
    type='mmpretrain.SkipNonFiniteOptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999),
                   weight_decay=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=1,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=1,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=8, val_interval=2)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
