# The tools' smoke config where rank 1 stops (SIGSTOP) after 1 iteration
# (the test plugin tests/engine/stop_worker.py, found through PYTHONPATH),
# with a short collective timeout.
_base_ = ['./tiny_softmax_fmnist.py']

custom_imports = dict(imports=['mmlvit', 'stop_worker'])
custom_hooks = [dict(type='StopWorkerHook', after_iter=1, rank=1)]
env_cfg = dict(dist_cfg=dict(timeout=5))
