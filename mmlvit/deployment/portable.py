"""A trained classifier as a safetensors file plus a small JSON file.

:func:`export_portable` writes the classifier's weights as safetensors
(``backbone.*``, ``head.*``: the names of its mmpretrain checkpoint) and
the model's own config dict as JSON (``model``: types and arguments, as
mmpretrain's registry builds them, its data preprocessor included, nothing
of the training run); :func:`load_portable` rebuilds the classifier from
that pair with ``import mmlvit`` and mmpretrain's registry, without a
config file, as a :class:`~.classifier.DeployableClassifier`: raw pixels
in, as the ONNX export takes them. A distiller config exports its student.
"""

import json
import os
import os.path as osp

import torch

from .classifier import DeployableClassifier, load_classifier

FORMAT = 'mmlvit-classifier'
FORMAT_VERSION = 1


def _plain(value):
    """Config values as JSON values (tuples become lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(
        f'{value!r} ({type(value).__name__}) cannot be written to JSON: the '
        'model config must be plain data.'
    )


def _without_init(model_cfg):
    """The config without ``init_cfg`` entries: the weights come from the
    safetensors file, and a ``Pretrained`` init would name a training
    checkpoint."""
    if isinstance(model_cfg, dict):
        return {
            k: _without_init(v)
            for k, v in model_cfg.items()
            if k != 'init_cfg'
        }
    if isinstance(model_cfg, list):
        return [_without_init(v) for v in model_cfg]
    return model_cfg


def export_portable(cfg, checkpoint, out):
    """Write ``{out}.safetensors`` and ``{out}.json`` for a classifier.

    Args:
        cfg (Config | str): The classifier or distiller config (a
            distiller's student is exported).
        checkpoint (str): Its trained checkpoint (a classifier state dict,
            as training saves it).
        out (str): Path without suffix (a ``.safetensors`` or ``.json``
            suffix is dropped).

    Returns:
        tuple[str, str]: The safetensors and JSON paths.
    """
    from safetensors.torch import save_file

    model, cfg = load_classifier(cfg, checkpoint)
    stem = (
        osp.splitext(out)[0]
        if out.endswith(('.safetensors', '.json'))
        else out
    )
    if osp.dirname(stem):
        os.makedirs(osp.dirname(stem), exist_ok=True)
    weights, config = stem + '.safetensors', stem + '.json'
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, weights, metadata=dict(format=FORMAT))
    from mmlvit import __version__

    record = dict(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        mmlvit_version=__version__,
        weights=osp.basename(weights),
        model=_plain(_without_init(cfg.model.to_dict())),
    )
    with open(config, 'w') as f:
        json.dump(record, f, indent=2)
        f.write('\n')
    return weights, config


def load_portable(path, device='cpu'):
    """Rebuild a classifier written by :func:`export_portable`.

    Args:
        path (str): The JSON file, the safetensors file beside it, or their
            common path without suffix.
        device (str | torch.device): Where to put the model.

    Returns:
        DeployableClassifier: In eval mode, weights loaded strictly: raw
        pixels (0-255, the test pipeline's channel order) -> class scores,
        ``.logits(images)`` -> logits, ``.classifier`` the mmpretrain
        classifier (which takes normalised images).
    """
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    from safetensors.torch import load_file

    import mmlvit  # noqa: F401  (registers the operators)

    stem = path
    if path.endswith(('.safetensors', '.json')):
        stem = osp.splitext(path)[0]
    with open(stem + '.json') as f:
        record = json.load(f)
    if record.get('format') != FORMAT:
        raise ValueError(
            f'{stem}.json is not an mmlvit classifier description (format '
            f'{record.get("format")!r}, expected {FORMAT!r}).'
        )
    weights = osp.join(osp.dirname(stem), record['weights'])
    init_default_scope('mmpretrain')
    model = MODELS.build(record['model'])
    model.load_state_dict(load_file(weights), strict=True)
    deployable = DeployableClassifier(model.eval())
    return deployable.to(torch.device(device))
