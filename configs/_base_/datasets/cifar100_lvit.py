# CIFAR-100 (100 classes; 50,000 train / 10,000 test 32 px images) upsampled
# to 224 px with the paper's recipe (mmpretrain's CIFAR100 class, no
# download). Pipelines and batch as CIFAR-10.
# data_root = data/cifar100, holding the extracted cifar-100-python.tar.gz:
#   data/cifar100/cifar-100-python/train, test, meta
_base_ = ['./cifar10_lvit.py']

dataset_type = 'CIFAR100'
data_root = 'data/cifar100'
data_preprocessor = dict(num_classes=100)
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
