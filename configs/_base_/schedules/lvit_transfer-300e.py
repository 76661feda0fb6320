# The paper's transfer recipe is its ImageNet-1K recipe (lvit_in1k.py):
# AdamW, base lr 2e-3 for a total batch of 512 (the transfer datasets' batch,
# 64 per GPU x 8 GPUs, so the auto-scaled lr stays 2e-3), 50 warm-up epochs
# then cosine to 1e-6, 300 epochs.
_base_ = ['./lvit_in1k.py']
