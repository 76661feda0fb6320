"""Run under Triton's interpreter (test_op_traffic.py starts it in a fresh
process): a probe kernel's launch counted by
lab.benchmarks.op_traffic, printed as one JSON line of bytes by name.

Two programs each load the first 40 of 100 fp32 elements twice and store
20 fp16 elements (program p at 20 p), under masks: 40 x 4 distinct bytes
loaded and 40 x 2 stored, 240 bytes, where the launch's tensor arguments
hold 600.
"""

import json
import os
import sys

if 'triton' in sys.modules:
    raise RuntimeError('TRITON_INTERPRET must be set before triton imports.')
os.environ['TRITON_INTERPRET'] = '1'

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.benchmarks import op_traffic  # noqa: E402


@triton.jit
def probe_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    loaded = offsets < n
    twice = tl.load(x_ptr + offsets, mask=loaded)
    twice += tl.load(x_ptr + offsets, mask=loaded)
    half = n // 2
    stored = offsets < half
    mine = tl.program_id(0) * half + offsets
    tl.store(y_ptr + mine, twice.to(tl.float16), mask=stored)


def main():
    x = torch.randn(100)
    y = torch.zeros(100, dtype=torch.float16)
    with op_traffic.counting_traffic() as counter:
        probe_kernel[(2,)](x, y, 40, BLOCK=64)
    # The kernel ran: each program stored twice x's first 20 elements.
    assert torch.equal(y[:40], (2 * x[:20]).half().repeat(2))
    print(
        json.dumps({name: moved for (_, name), moved in counter.bytes.items()})
    )


if __name__ == '__main__':
    main()
