# deit-s_mlpcopy-distill.py on Flowers-102: the dataset, the 600-epoch
# transfer schedule and a 102-class head. A leaf config sets the operator.
_base_ = [
    './deit-s_mlpcopy-distill.py',
    '../datasets/flowers102_lvit.py',
    '../schedules/lvit_transfer-600e.py',
]

model = dict(student=dict(head=dict(num_classes=102)))
