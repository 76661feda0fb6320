# Fashion-MNIST (10 classes; 60,000 train / 10,000 test 28 px grey images)
# with the paper's 224 px recipe, for students of 3-channel softmax ViTs
# (tools/convert.py --dataset fashion-mnist): each grey image becomes three
# equal channels (MatchChannels) before the recipe's crops, so the ImageNet
# mean and std the teacher was trained with apply as they are.
# Data: `apt-get install dataset-fashion-mnist` then
# `python tools/data/prepare_fashion_mnist.py` (extracts into data_root).
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'FashionMNIST'
data_root = 'data/fashion_mnist'
data_preprocessor = dict(num_classes=10)

train_pipeline = [
    dict(type='MatchChannels', channels=3),
    *_base_.train_pipeline[1:],
]
test_pipeline = [
    dict(type='MatchChannels', channels=3),
    *_base_.test_pipeline[1:],
]

train_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='train',
    download=False, pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root, split='test',
    test_mode=True, download=False, pipeline=test_pipeline))
test_dataloader = val_dataloader
