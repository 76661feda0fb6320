"""FLOPs of a call, counted by ``torch.utils.flop_counter.FlopCounterMode``
(matrix products and convolutions, forward and backward, 2 per
multiply-add; element-wise ops and custom kernels are not counted), with
formulas for the CPU kernels of SDPA, which torch's counter does not know
(it knows the CUDA ones)."""

import torch
from torch.utils import flop_counter


def _cpu_sdpa_flops(query, key, value, *args, out_shape=None, **kwargs):
    """(q, k, v) shapes (B, h, N, d) -> 4 B N^2 h d: q k^T and A v."""
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward_flops(
    grad_out, query, key, value, *args, out_shape=None, **kwargs
):
    """The recomputed q k^T and four products of the same size."""
    return flop_counter.sdpa_backward_flop_count(grad_out, query, key, value)


CPU_SDPA_FLOPS = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: (
        _cpu_sdpa_flops
    ),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        _cpu_sdpa_backward_flops
    ),
}


class FlopCountedStep:
    """Calls ``step``; the first call also counts its FLOPs (``flops``)."""

    def __init__(self, step):
        self.step = step
        self.flops = None

    def __call__(self):
        if self.flops is not None:
            return self.step()
        counter = flop_counter.FlopCounterMode(
            display=False, custom_mapping=CPU_SDPA_FLOPS
        )
        with counter:
            self.step()
        self.flops = counter.get_total_flops()


def count_flops(step):
    """FLOPs of one call of ``step``."""
    counted = FlopCountedStep(step)
    counted()
    return counted.flops
