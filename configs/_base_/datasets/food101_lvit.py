# Food-101 (101 classes; 75,750 train / 25,250 test images) with the paper's
# recipe at 224 px (mmpretrain's Food101 class).
# data_root = data/food-101, the extracted food-101.tar.gz:
#   data/food-101/images/apple_pie/*.jpg ...   (101 class folders)
#   data/food-101/meta/train.txt, test.txt     ("apple_pie/1005649" lines)
# Pipelines, batch 64 per GPU (x 8 GPUs = 512, the paper's batch) and metric
# as in imagenet_bs64_lvit.py; train on the 'train' split; validation and
# test on the 'test' split with a fresh dataset dict (the class sets
# test_mode from its split).
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'Food101'
data_root = 'data/food-101'
data_preprocessor = dict(num_classes=101)
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='test',
    pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
