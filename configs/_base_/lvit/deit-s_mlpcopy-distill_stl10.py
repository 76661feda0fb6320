# deit-s_mlpcopy-distill.py on STL-10: the dataset, the 300-epoch transfer
# schedule and a 10-class head. A leaf config sets the operator.
_base_ = [
    './deit-s_mlpcopy-distill.py',
    '../datasets/stl10_lvit.py',
    '../schedules/lvit_transfer-300e.py',
]

model = dict(student=dict(head=dict(num_classes=10)))
