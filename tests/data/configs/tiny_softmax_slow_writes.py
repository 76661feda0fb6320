# The tools' smoke config with slowed checkpoint writes (the test plugin
# tests/engine/slow_writer.py, found through PYTHONPATH), so that a test can
# kill training in the middle of a save.
_base_ = ['./tiny_softmax_fmnist.py']

custom_imports = dict(imports=['mmlvit', 'slow_writer'])
train_cfg = dict(max_epochs=4)
default_hooks = dict(checkpoint=dict(max_keep_ckpts=1, save_best='auto'))
