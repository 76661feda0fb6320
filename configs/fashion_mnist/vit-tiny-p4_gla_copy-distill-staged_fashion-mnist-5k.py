# The tiny copy-distill recipe (vit-tiny-p4_gla_copy-distill_fashion-mnist-5k
# .py) in two stages (docs/stages.md): 4 epochs that train only the attention
# modules on attention distillation, then 6 epochs that train the whole
# student on the task, attention distillation and logit KD.
# Teacher: checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth (made by
# tools/analysis/reproduce.py, or --cfg-options model.teacher_checkpoint=...).
_base_ = [
    '../_base_/models/lvit/vit-tiny-p4_28px_distill.py',
    '../_base_/datasets/fashion_mnist-5k_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]

# Every loss a stage weighs is in the list from the start (LogitKD at 0).
model = dict(
    teacher_checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth',
    distill_losses=[
        dict(type='AttentionOutputMSE', loss_weight=50.),
        dict(type='LogitKD', loss_weight=0.),
    ])
custom_hooks = [
    dict(type='SoftmaxToLinearInitHook', setting='MLPCopy'),
    dict(
        type='ConversionStagesHook',
        stages=[
            dict(epochs=4, task_loss=False, trainable=['attn']),
            dict(epochs=6, losses=dict(LogitKD=1.)),
        ]),
]
