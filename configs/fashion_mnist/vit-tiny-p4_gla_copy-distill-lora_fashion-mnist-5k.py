# The tiny copy-distill recipe (vit-tiny-p4_gla_copy-distill_fashion-mnist-5k
# .py) with a low-rank adapter stage (docs/stages.md): 4 epochs that train
# the student (all but the adapters) on attention distillation, then 6 epochs
# that train only rank-4 adapters on the attention projections and the head,
# on the task and logit KD. Checkpoints are plain classifiers (the adapters
# merged into the weights).
# Teacher: checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth (made by
# tools/analysis/reproduce.py, or --cfg-options model.teacher_checkpoint=...).
_base_ = [
    '../_base_/models/lvit/vit-tiny-p4_28px_distill.py',
    '../_base_/datasets/fashion_mnist-5k_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]

model = dict(
    teacher_checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth',
    adapters=dict(rank=4, alpha=4, targets=['attn.qkv', 'attn.proj']),
    distill_losses=[
        dict(type='AttentionOutputMSE', loss_weight=50.),
        dict(type='LogitKD', loss_weight=0.),
    ])
custom_hooks = [
    dict(type='SoftmaxToLinearInitHook', setting='MLPCopy'),
    dict(
        type='ConversionStagesHook',
        stages=[
            dict(epochs=4, task_loss=False),
            dict(
                epochs=6,
                trainable=['lora_', 'head'],
                losses=dict(AttentionOutputMSE=0., LogitKD=1.)),
        ]),
]
