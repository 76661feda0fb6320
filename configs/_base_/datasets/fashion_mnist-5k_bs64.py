# Fashion-MNIST target of the small-scale experiments: the first 5,000
# training images, evaluated on the full 10,000-image test split.
_base_ = ['./fashion_mnist_bs64.py']

train_dataloader = dict(dataset=dict(indices=5000))
