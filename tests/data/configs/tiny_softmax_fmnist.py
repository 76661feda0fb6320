# A very small softmax ViT on a Fashion-MNIST subset: the tools' smoke config.
_base_ = ['../../../configs/fashion_mnist/vit-tiny-p4_softmax_fashion-mnist.py']

model = dict(
    backbone=dict(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        patch_size=7),
    head=dict(in_channels=32))
# No random augmentation, so that a 2-process run sees exactly the same
# global batches as a 1-process run.
train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    dataset=dict(indices=128, pipeline={{_base_.test_pipeline}}))
val_dataloader = dict(batch_size=64, num_workers=0, dataset=dict(indices=128))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=2)
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
