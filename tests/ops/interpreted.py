"""Imported first by this folder's interpreter scripts: Triton reads
TRITON_INTERPRET when it is imported, so the scripts set it here, before
any import that may bring triton in, and run their kernels on CPU tensors
under Triton's interpreter."""

import os
import sys

if 'triton' in sys.modules:
    raise RuntimeError('TRITON_INTERPRET must be set before triton imports.')
os.environ['TRITON_INTERPRET'] = '1'
