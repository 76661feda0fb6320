# Your own images with the paper's 224 px recipe (tools/convert.py --dataset
# folder --data-root DIR): mmpretrain's CustomDataset, classes read from the
# sub-folder names, in this layout:
#   DIR/train/<class>/*.jpg (or .png, ...)
#   DIR/val/<class>/*.jpg   (the same class folders)
# Images are read in colour (grey files become three equal channels) and
# normalised with the ImageNet mean and std the teacher was trained with.
# tools/convert.py writes data_root and the number of classes.
_base_ = ['./imagenet_bs64_lvit.py']

dataset_type = 'CustomDataset'
data_root = 'data/images'

train_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root,
    data_prefix='train', pipeline=_base_.train_pipeline))
val_dataloader = dict(dataset=dict(
    _delete_=True, type=dataset_type, data_root=data_root,
    data_prefix='val', test_mode=True, pipeline=_base_.test_pipeline))
test_dataloader = val_dataloader
