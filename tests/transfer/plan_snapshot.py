"""The plans of every init setting for every registered operator, as plain
data, and their digests: ``test_copy_rules.py`` compares them with
``data/plan_digests.json``, captured from the copy rules as first written.

Run as a script to write the file again (only when a plan is meant to
change): ``python tests/transfer/plan_snapshot.py``.
"""

import hashlib
import json
import os.path as osp
import sys

import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

HERE = osp.dirname(osp.abspath(__file__))
sys.path.insert(0, osp.dirname(HERE))  # tests/: the tiny ViT configs

from tiny_vit import backbone_cfg, classifier_cfg  # noqa: E402

import mmlvit  # noqa: E402, F401
from mmlvit.models.attentions import registered_operators  # noqa: E402
from mmlvit.transfer import SETTINGS, plan_init  # noqa: E402

SNAPSHOT = osp.join(HERE, 'data', 'plan_digests.json')
# Students that exercise every copy rule: the plain tiny ViT, a larger
# patch grid (pos_embed resized), no class token, and a hybrid whose first
# block is softmax attention (copy_softmax_attention).
STUDENTS = {
    'tiny': dict(),
    'grid6': dict(img_size=48),
    'nocls': dict(with_cls_token=False, out_type='avg_featmap'),
}


def _softmax_state():
    torch.manual_seed(0)
    model = MODELS.build(classifier_cfg(backbone_cfg()))
    return model.state_dict()


def _plan(student, state, setting, copy_softmax_attention=False):
    try:
        report = plan_init(
            student,
            state,
            setting,
            copy_softmax_attention=copy_softmax_attention,
        )
    except (ValueError, TypeError) as error:
        return dict(error=f'{type(error).__name__}: {error}')
    return dict(
        records=[
            [r.key, r.component, r.action, r.numel, r.reason]
            for r in report.records
        ],
        unused=list(report.unused),
    )


def snapshot():
    """{operator/student/setting: plan or error} for every combination."""
    init_default_scope('mmpretrain')
    state = _softmax_state()
    plans = {}
    for operator in registered_operators():
        for student_name, kwargs in STUDENTS.items():
            try:
                torch.manual_seed(0)
                student = MODELS.build(
                    classifier_cfg(backbone_cfg(operator, **kwargs))
                )
            except (ValueError, TypeError) as error:
                plans[f'{operator}/{student_name}'] = dict(
                    error=f'{type(error).__name__}: {error}'
                )
                continue
            for setting in SETTINGS:
                key = f'{operator}/{student_name}/{setting}'
                plans[key] = _plan(student, state, setting)
        hybrid = backbone_cfg(operator)
        softmax = dict(type='SoftmaxAttention')
        hybrid['attn_cfg'] = [softmax, hybrid['attn_cfg']]
        student = MODELS.build(classifier_cfg(hybrid))
        for setting in SETTINGS:
            key = f'{operator}/hybrid/{setting}'
            plans[key] = _plan(student, state, setting, True)
    return plans


def digest(plan):
    """A short hash of one plan (its records in order, or its error)."""
    text = json.dumps(plan, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


if __name__ == '__main__':
    digests = {key: digest(plan) for key, plan in snapshot().items()}
    with open(SNAPSHOT, 'w') as file:
        json.dump(digests, file, indent=0, sort_keys=True)
        file.write('\n')
    print(f'wrote {SNAPSHOT}')
