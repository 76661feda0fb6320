# ImageNet-Sketch (50,889 sketches of all 1000 ImageNet classes).
# data_root = data/imagenet-sketch, the extracted ImageNet-Sketch.zip:
#   data/imagenet-sketch/sketch/n01440764/*.JPEG ...   (1000 wnid folders)
# Test only (data_preprocessor, test_dataloader, test_evaluator) for a model
# trained on ImageNet-1K: labels are ImageNet-1K class indices. Combine it
# with a model config and default_runtime.py, plus test_cfg = dict(), as in
# docs/datasets.md ("Out-of-distribution evaluation"). Normalisation, test
# pipeline, loader and metric as for ImageNet-1K (imagenet-eval_common.py).
_base_ = ['./imagenet-eval_common.py']

test_dataloader = dict(dataset=dict(
    type='ImageNetSubset', data_root='data/imagenet-sketch',
    data_prefix='sketch', subset='imagenet-1k'))
