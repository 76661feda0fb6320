# The transfer recipe (lvit_in1k.py at a total batch of 512) for twice the
# epochs: 100 warm-up epochs then cosine to 1e-6, 600 epochs.
_base_ = ['./lvit_in1k.py']

param_scheduler = [
    dict(_base_.param_scheduler[0], end=100),  # linear warm-up
    dict(_base_.param_scheduler[1], begin=100, end=600),  # cosine
]
train_cfg = dict(max_epochs=600)
