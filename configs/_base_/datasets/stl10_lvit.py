# STL-10 (10 classes; 5,000 train / 8,000 test 96 px images) upsampled to
# 224 px with the paper's recipe (mmlvit's STL10 class; the unlabelled
# split is not used).
# data_root = data/stl10, holding the extracted stl10_binary.tar.gz:
#   data/stl10/stl10_binary/train_X.bin, train_y.bin, test_X.bin,
#   test_y.bin (class_names.txt optional)
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch). Pipelines
# and metric as in imagenet_bs64_lvit.py; train on the 'train' split;
# validation and test on the 'test' split with a fresh dataset dict (the
# class sets test_mode from its split).
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'STL10'
data_root = 'data/stl10'
data_preprocessor = dict(num_classes=10)

# STL10 yields decoded BGR arrays: the recipe's pipelines without the
# image loading.
train_pipeline = _base_.train_pipeline[1:]
test_pipeline = _base_.test_pipeline[1:]

train_dataloader = dict(dataset=dict(
    type=dataset_type, data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='test',
    pipeline=test_pipeline))
test_dataloader = val_dataloader
