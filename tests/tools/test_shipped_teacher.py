"""The tiny softmax teacher shipped in checkpoints/ (the one the demo and
the small-scale grids start from) still reaches its recorded Fashion-MNIST
test accuracy through the standard tools/test.py."""

import re

from tool_runs import run_log

TEACHER = 'checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'
CONFIG = 'configs/fashion_mnist/vit-tiny-p4_softmax_fashion-mnist.py'


def test_shipped_teacher_accuracy(
    repo_root, python, fashion_mnist_root, tmp_path
):
    from mmlvit.checkpoint import load_checkpoint_file

    checkpoint = load_checkpoint_file(f'{repo_root}/{TEACHER}')
    recorded = checkpoint['meta']['fashion_mnist_test_top1']
    assert recorded >= 88.0
    log = run_log(
        [python, 'tools/test.py', CONFIG, TEACHER, '--work-dir', tmp_path],
        repo_root,
    )
    top1 = float(re.findall(r'accuracy/top1: ([\d.]+)', log)[-1])
    # 10,000 test images: 0.05 % is 5 images of float-order slack.
    assert abs(top1 - recorded) < 0.05, (top1, recorded)
