# CIFAR-10 (10 classes; 50,000 train / 10,000 test 32 px images) upsampled to
# 224 px with the paper's recipe (mmpretrain's CIFAR10 class, no download).
# data_root = data/cifar10, holding the extracted cifar-10-python.tar.gz:
#   data/cifar10/cifar-10-batches-py/data_batch_1 ... data_batch_5,
#   test_batch, batches.meta
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch). Pipelines
# and metric as in imagenet_bs64_lvit.py; the evaluation loader keeps its
# test_mode.
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'CIFAR10'
data_root = 'data/cifar10'
data_preprocessor = dict(num_classes=10)

# mmpretrain's CIFAR yields RGB arrays; ColorJitter and the preprocessor
# expect BGR (as LoadImageFromFile gives): PILToNumpy takes the place of the
# image loading.
train_pipeline = [
    dict(type='PILToNumpy', to_bgr=True),
    *_base_.train_pipeline[1:],
]
test_pipeline = [
    dict(type='PILToNumpy', to_bgr=True),
    *_base_.test_pipeline[1:],
]

train_dataloader = dict(dataset=dict(
    type=dataset_type, data_root=data_root, download=False,
    pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(
    type=dataset_type, data_root=data_root, split='test', download=False,
    pipeline=test_pipeline))
test_dataloader = val_dataloader
