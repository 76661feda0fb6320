# The tools' smoke config trained with FSDP, set as README says: nothing
# else is needed on a CPU-only machine (tools/train.py puts the wrapper on
# the CPU there).
_base_ = ['./tiny_softmax_fmnist.py']

runner_type = 'FlexibleRunner'
strategy = dict(type='FSDPStrategy')
