# CIFAR-100 (100 classes; 50,000 train / 10,000 test 32 px images) upsampled
# to 224 px with the paper's recipe (mmpretrain's CIFAR100 class, no
# download). Pipelines and batch as CIFAR-10 (cifar10_lvit.py).
# data_root = data/cifar100, holding the extracted cifar-100-python.tar.gz:
#   data/cifar100/cifar-100-python/train, test, meta
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'CIFAR100'
data_root = 'data/cifar100'
data_preprocessor = dict(num_classes=100)

# RGB arrays to BGR in place of the image loading, as for CIFAR-10.
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
