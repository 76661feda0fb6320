"""What several operators share: the backend choice (:mod:`.dispatch`),
head splitting, precision scopes, recomputation, the Triton runtime and
math, export tracing, the fused kernel-attention kernels (kernel attention,
InLine and MHLA) and the depthwise convolution (MHLA's value conv, TTT's
conv head)."""
