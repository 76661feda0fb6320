# Linear DeiT-S student distilled from a frozen softmax DeiT-S teacher
# (as deit-b_distill.py, at DeiT-S width, without drop path). Set
# model.teacher_checkpoint to the softmax DeiT-S checkpoint.
_base_ = ['./deit-b_distill.py']

model = dict(
    student=dict(
        backbone=dict(arch='deit-small', drop_path_rate=0.),
        head=dict(in_channels=384)),
    teacher=dict(backbone=dict(arch='deit-small'), head=dict(in_channels=384)))
