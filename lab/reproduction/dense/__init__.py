"""The dense task of the reproduction engine
(``tools/analysis/reproduce_dense.py``, docs/dense_reproduction.md): the
ready-made UperNet / Mask R-CNN configs of Dense Fashion-MNIST with a GLA
backbone started at random or copied and distilled from the tiny softmax
classifier, against the softmax backbone; mIoU, box and mask AP."""
