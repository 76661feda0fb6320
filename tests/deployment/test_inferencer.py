"""mmpretrain's inferencer with mmlvit configs and checkpoints, on a real
Fashion-MNIST test image written to PNG; the ONNX graph that
tools/deployment/export_onnx.py writes for the shipped checkpoint gives the
inferencer's scores on it."""

import os.path as osp

import mmcv
import numpy as np
import pytest
import torch
from mmpretrain.apis import ImageClassificationInferencer
from mmpretrain.datasets import FashionMNIST

from mmlvit.deployment import (
    DeployableClassifier,
    classifier_config,
    load_classifier,
)
from mmlvit.deployment.onnx_runtime import onnxruntime_session

SOFTMAX_CONFIG = 'configs/fashion_mnist/vit-tiny-p4_softmax_fashion-mnist.py'
SOFTMAX_CHECKPOINT = 'checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'
DISTILL_CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'


@pytest.fixture(scope='module')
def test_image(fashion_mnist_root, tmp_path_factory):
    """Test image 0 (an ankle boot) as a grey PNG: (path, label)."""
    dataset = FashionMNIST(
        data_root=fashion_mnist_root, split='test', pipeline=[]
    )
    info = dataset.get_data_info(0)
    path = str(tmp_path_factory.mktemp('images') / 'test_0.png')
    mmcv.imwrite(info['img'], path)
    return path, dataset.METAINFO['classes'][info['gt_label']]


def grey(path):
    """A grey image as the 1-channel models need it: the inferencer reads
    a path in colour (3 channels), so it gets the (H, W) array."""
    return mmcv.imread(path, flag='grayscale')


def test_inferencer_and_onnx_on_shipped_checkpoint(
    repo_root, test_image, tmp_path, load_tool
):
    path, label = test_image
    config, checkpoint = (
        osp.join(repo_root, p) for p in (SOFTMAX_CONFIG, SOFTMAX_CHECKPOINT)
    )
    inferencer = ImageClassificationInferencer(
        config, pretrained=checkpoint, device='cpu'
    )
    result = inferencer(grey(path))[0]
    assert result['pred_class'] == label == 'Ankle boot'
    # The export tool's graph gives the inferencer's scores on the pixels.
    tool = load_tool('tools/deployment/export_onnx.py')
    onnx_file = str(tmp_path / 'vit-tiny.onnx')
    diff = tool.main([config, '--checkpoint', checkpoint, '--out', onnx_file])
    assert diff < 1e-5  # random batch of 3, the graph traced with 2
    session = onnxruntime_session(onnx_file)
    pixels = grey(path).astype(np.float32)[None, None]
    scores = session.run(None, {'images': pixels})[0][0]
    np.testing.assert_allclose(scores, result['pred_scores'], atol=1e-5)


def test_inferencer_reads_the_png_path_of_a_grey_model(repo_root, test_image):
    """The inferencer reads a path in colour (H, W, 3); the grey models'
    test pipeline converts it (MatchChannels) and the answer is the grey
    array's."""
    path, label = test_image
    config, checkpoint = (
        osp.join(repo_root, p) for p in (SOFTMAX_CONFIG, SOFTMAX_CHECKPOINT)
    )
    inferencer = ImageClassificationInferencer(
        config, pretrained=checkpoint, device='cpu'
    )
    from_path = inferencer(path)[0]
    from_array = inferencer(grey(path))[0]
    assert from_path['pred_class'] == label
    np.testing.assert_allclose(
        from_path['pred_scores'], from_array['pred_scores'], atol=1e-6
    )


def test_inferencer_on_distilled_student(repo_root, test_image, tmp_path):
    """A distiller's checkpoint holds the student alone; the inferencer
    takes the distill config as it is (no teacher file: the distiller runs
    its student), or the student's classifier config."""
    path, _ = test_image
    config = osp.join(repo_root, DISTILL_CONFIG)
    torch.manual_seed(0)
    student, _ = load_classifier(config)
    with torch.no_grad():  # a student far from its init
        for param in student.parameters():
            param.add_(torch.randn_like(param) * 0.5)
    checkpoint = str(tmp_path / 'student.pth')
    meta = dict(dataset_meta=dict(classes=FashionMNIST.METAINFO['classes']))
    torch.save(dict(state_dict=student.state_dict(), meta=meta), checkpoint)

    image = torch.from_numpy(grey(path)).float()[None, None]
    with torch.no_grad():
        expected = DeployableClassifier(student)(image)[0]
    cfg = classifier_config(config)
    assert cfg.model.type == 'ImageClassifier'
    assert 'custom_hooks' not in cfg
    for model in (config, cfg):
        inferencer = ImageClassificationInferencer(
            model, pretrained=checkpoint, device='cpu'
        )
        result = inferencer(grey(path))[0]
        np.testing.assert_allclose(result['pred_scores'], expected, atol=1e-6)
        assert result['pred_class'] in FashionMNIST.METAINFO['classes']


def test_inferencer_on_shipped_distill_config_reads_png(
    repo_root, test_image, tmp_path
):
    """The shipped distillation config (teacher shipped too), a PNG path,
    the student's checkpoint: the student's scores on the grey image."""
    path, _ = test_image
    config = osp.join(
        repo_root,
        'configs/fashion_mnist/vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py',
    )
    torch.manual_seed(0)
    student, _ = load_classifier(config)
    checkpoint = str(tmp_path / 'student.pth')
    torch.save(dict(state_dict=student.state_dict(), meta={}), checkpoint)
    inferencer = ImageClassificationInferencer(
        config, pretrained=checkpoint, device='cpu'
    )
    image = torch.from_numpy(grey(path)).float()[None, None]
    with torch.no_grad():
        expected = DeployableClassifier(student)(image)[0]
    result = inferencer(path)[0]
    np.testing.assert_allclose(result['pred_scores'], expected, atol=1e-5)
