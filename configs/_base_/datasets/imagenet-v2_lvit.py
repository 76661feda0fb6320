# ImageNet-V2 matched-frequency (10,000 images of all 1000 ImageNet classes).
# data_root = data/imagenetv2, the extracted
# imagenetv2-matched-frequency.tar.gz; its folders are class indices:
#   data/imagenetv2/imagenetv2-matched-frequency-format-val/0/*.jpeg ...
#   ... /999/
# Test only (data_preprocessor, test_dataloader, test_evaluator) for a model
# trained on ImageNet-1K: labels are ImageNet-1K class indices. Combine it
# with a model config and default_runtime.py, plus test_cfg = dict(), as in
# docs/datasets.md ("Out-of-distribution evaluation"). Normalisation, test
# pipeline, loader and metric as for ImageNet-1K (imagenet-eval_common.py).
_base_ = ['./imagenet-eval_common.py']

test_dataloader = dict(dataset=dict(
    type='ImageNetV2', data_root='data/imagenetv2',
    data_prefix='imagenetv2-matched-frequency-format-val'))
