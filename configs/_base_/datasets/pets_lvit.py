# Oxford-IIIT Pets (37 classes; 3,680 trainval / 3,669 test images) with the
# paper's recipe at 224 px (mmpretrain's OxfordIIITPet class).
# data_root = data/oxford-iiit-pet, the extracted images.tar.gz and
# annotations.tar.gz:
#   data/oxford-iiit-pet/images/Abyssinian_1.jpg ...
#   data/oxford-iiit-pet/annotations/trainval.txt, test.txt
# Pipelines, batch 64 per GPU (x 8 GPUs = 512, the paper's batch) and metric
# as in imagenet_bs64_lvit.py; validation and test on the 'test' split with
# a fresh dataset dict (the class sets test_mode from its split).
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'OxfordIIITPet'
data_root = 'data/oxford-iiit-pet'
data_preprocessor = dict(num_classes=37)
train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root, split='trainval'))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='test',
    pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
