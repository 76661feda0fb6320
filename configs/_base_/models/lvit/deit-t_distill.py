# Linear DeiT-T student distilled from a frozen softmax DeiT-T teacher
# (as deit-b_distill.py, at DeiT-T width, without drop path). Set
# model.teacher_checkpoint to the softmax DeiT-T checkpoint.
_base_ = ['./deit-b_distill.py']

model = dict(
    student=dict(
        backbone=dict(arch='deit-tiny', drop_path_rate=0.),
        head=dict(in_channels=192)),
    teacher=dict(backbone=dict(arch='deit-tiny'), head=dict(in_channels=192)))
