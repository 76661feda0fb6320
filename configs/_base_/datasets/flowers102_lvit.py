# Oxford Flowers-102 (102 classes) with the paper's recipe at 224 px
# (mmpretrain's Flowers102 class). The paper trains on the official train
# split (1,020 images) and tests on the test split (6,149); train+val (2,040)
# is --cfg-options train_dataloader.dataset.split=trainval.
# data_root = data/flowers102:
#   data/flowers102/jpg/image_00001.jpg ...    (from 102flowers.tgz)
#   data/flowers102/imagelabels.mat, setid.mat
# Pipelines, batch 64 per GPU (x 8 GPUs = 512, the paper's batch) and metric
# as in imagenet_bs64_lvit.py; train on the 'train' split; validation and
# test on the 'test' split with a fresh dataset dict (the class sets
# test_mode from its split).
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'Flowers102'
data_root = 'data/flowers102'
data_preprocessor = dict(num_classes=102)
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='test',
    pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
