# The paper's recipe (after Xu et al. 2024): AdamW, base lr 2e-3 for a total
# batch of 512 (auto-scaled to the actual total batch, here 4096), weight decay
# 0.05, betas (0.9, 0.999), 50 warm-up epochs then cosine to 1e-6, 300 epochs,
# gradient clipping 3.0 (label smoothing 0.1 lives in the model's head).
# An update whose loss or gradients are not finite (a NaN pixel, an
# overflow) is skipped with a warning, and training stops after
# max_consecutive_skips (default 10) such updates in a row. The default stays
# unstated so that mmpretrain's own train.py --amp, which swaps in
# AmpOptimWrapper, still builds.
optim_wrapper = dict(
    type='SkipNonFiniteOptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05,
                   betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={'.cls_token': dict(decay_mult=0.0),
                     '.pos_embed': dict(decay_mult=0.0)}),
    clip_grad=dict(max_norm=3.0),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0,
         end=50, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=50,
         end=300, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=512, enable=True)
