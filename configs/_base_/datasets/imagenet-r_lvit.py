# ImageNet-R (30,000 renditions of 200 ImageNet classes).
# Scores are restricted to the 200 classes before arg-max (SubsetAccuracy).
# data_root = data/imagenet-r, the extracted imagenet-r.tar:
#   data/imagenet-r/n01443537/*.jpg ...   (200 wnid folders)
# Test only (data_preprocessor, test_dataloader, test_evaluator) for a model
# trained on ImageNet-1K: labels are ImageNet-1K class indices. Combine it
# with a model config and default_runtime.py, plus test_cfg = dict(), as in
# docs/datasets.md ("Out-of-distribution evaluation"). Normalisation, test
# pipeline and loader as for ImageNet-1K (imagenet-eval_common.py).
_base_ = ['./imagenet-eval_common.py']

test_dataloader = dict(dataset=dict(
    type='ImageNetSubset', data_root='data/imagenet-r', subset='imagenet-r'))
test_evaluator = dict(type='SubsetAccuracy')
