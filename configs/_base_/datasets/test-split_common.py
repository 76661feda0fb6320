# The paper's 224 px recipe (imagenet_bs64_lvit.py: pipelines, batch 64 per
# GPU, metric) for the dataset classes that set test_mode from their split
# (mmpretrain's Food101, Flowers102 and OxfordIIITPet, mmlvit's STL10):
# validation and test on the 'test' split, with a fresh dataset dict (no
# ImageNet test_mode). Not a dataset config by itself: the configs that
# inherit it name the dataset (dataset_type and data_root, in the train and
# val loaders).
_base_ = ['./imagenet_bs64_lvit.py']

val_dataloader = dict(
    dataset=dict(_delete_=True, split='test', pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
