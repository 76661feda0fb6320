# deit-s_mlpcopy-distill.py on Food-101: the dataset, the 300-epoch transfer
# schedule and a 101-class head. A leaf config sets the operator.
_base_ = [
    './deit-s_mlpcopy-distill.py',
    '../datasets/food101_lvit.py',
    '../schedules/lvit_transfer-300e.py',
]

model = dict(student=dict(head=dict(num_classes=101)))
