# The paper's recipe (lvit_in1k.py) scaled down for the small-scale runs:
# AdamW at lr 1e-3 (not auto-scaled: base batch 64 is the runs' batch),
# 1 warm-up epoch then cosine to 1e-6, 10 epochs.
_base_ = ['./lvit_in1k.py']

optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(_base_.param_scheduler[0], end=1),  # linear warm-up
    # Cosine to the end of training, whatever train_cfg.max_epochs is.
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=1,
         convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=10)
auto_scale_lr = dict(_delete_=True, base_batch_size=64)
