"""One preprocessing contract for every exported form: a raw image (0-255
pixels, as the test pipeline gives it) goes into the trained model through
mmpretrain's data preprocessor, into the ONNX graph and into the reloaded
safetensors export, and all three give the same class and scores."""

import numpy as np
import torch
from test_portable import DISTILL, trained_student

from mmlvit.deployment import (
    DeployableClassifier,
    export_onnx,
    export_portable,
    load_classifier,
    load_portable,
)
from mmlvit.deployment.onnx_runtime import onnxruntime_session


def test_raw_image_gives_one_answer_everywhere(repo_root, tmp_path):
    _, ckpt = trained_student(repo_root, tmp_path)
    config = f'{repo_root}/{DISTILL}'
    model, _ = load_classifier(config, str(ckpt))
    torch.manual_seed(1)
    image = torch.randint(0, 256, (1, 28, 28), dtype=torch.uint8)
    raw = image[None].float()
    with torch.no_grad():
        # The trained model as mmpretrain runs it: preprocessor, then model.
        data = model.data_preprocessor(dict(inputs=[image]), False)
        logits = model(data['inputs'], mode='tensor')
        scores = torch.softmax(logits, dim=-1)

        onnx_file = export_onnx(
            DeployableClassifier(model), str(tmp_path / 'm.onnx'), (1, 28, 28)
        )
        session = onnxruntime_session(onnx_file)
        feed = {session.get_inputs()[0].name: raw.numpy()}
        onnx_scores = torch.from_numpy(np.asarray(session.run(None, feed)[0]))

        _, json_file = export_portable(config, str(ckpt), str(tmp_path / 'p'))
        portable = load_portable(json_file)
        portable_logits = portable.logits(raw)
        portable_scores = portable(raw)

    assert scores.max() < 0.99  # a model whose scores can differ
    for got in (onnx_scores, portable_scores):
        assert got.argmax(-1).item() == logits.argmax(-1).item()
        torch.testing.assert_close(got, scores, atol=1e-5, rtol=0)
    torch.testing.assert_close(portable_logits, logits, atol=1e-5, rtol=0)
