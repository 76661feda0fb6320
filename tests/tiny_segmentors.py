"""Configs of small mmseg segmentors (3 classes) for the dense tests."""


def uper_head(in_channels, **kwargs):
    """A 3-class UPerHead (16 channels, BN) on four levels of
    ``in_channels`` channels each."""
    return dict(
        type='UPerHead',
        in_channels=[in_channels] * 4,
        in_index=[0, 1, 2, 3],
        channels=16,
        num_classes=3,
        norm_cfg=dict(type='BN'),
        loss_decode=dict(type='CrossEntropyLoss', avg_non_ignore=True),
        **kwargs,
    )


def encoder_decoder(backbone, neck, decode_head, **preprocessor):
    """An EncoderDecoder segmentor, whole-image inference;
    ``preprocessor`` configures its SegDataPreProcessor."""
    return dict(
        type='EncoderDecoder',
        data_preprocessor=dict(type='SegDataPreProcessor', **preprocessor),
        backbone=backbone,
        neck=neck,
        decode_head=decode_head,
        train_cfg=dict(),
        test_cfg=dict(mode='whole'),
    )
