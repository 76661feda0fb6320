# Runtime: mmpretrain's defaults, plus the mmlvit plugin import so that the
# config also works under `mim train mmpretrain` and mmpretrain's own tools.
_base_ = ['mmpretrain::_base_/default_runtime.py']

custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)
