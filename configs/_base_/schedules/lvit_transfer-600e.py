# The transfer recipe (lvit_transfer-300e.py) for twice the epochs: 100
# warm-up epochs then cosine to 1e-6, 600 epochs.
_base_ = ['./lvit_transfer-300e.py']

param_scheduler = [
    dict(_base_.param_scheduler[0], end=100),  # linear warm-up
    dict(_base_.param_scheduler[1], begin=100, end=600),  # cosine
]
train_cfg = dict(max_epochs=600)
