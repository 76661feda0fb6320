"""The classification task of the reproduction engine
(``tools/analysis/reproduce.py``, docs/reproduction.md): tiny linear ViT
students of the shipped softmax teacher on Fashion-MNIST-5k or MNIST-5k,
top-1 on the target's test split."""
