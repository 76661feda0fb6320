"""What the config of a Runner's checkpoint says about its backbone.

A ViT in mmpretrain keys shows its shape but not its head count, its
rotary positions, whether it had a position table at all, or its
LayerNorm eps: a file in a family's own layout gets these from the family
(:mod:`.family_defaults`), an mmpretrain-format file from nothing. A
checkpoint saved by an mmengine Runner (a softmax model trained or
fine-tuned with mmlvit) carries its config as text in ``meta['cfg']``
(``Config.pretty_text``); the settings are read from it without executing
it: only literals and ``dict(...)`` calls are evaluated, anything else
counts as absent.
"""

import ast
from collections.abc import Mapping

from mmengine.logging import print_log

from .family_defaults import DEFAULT_NORM_EPS


def trained_backbone_settings(checkpoint, name: str) -> dict:
    """The backbone settings a checkpoint's ``meta['cfg']`` states (logged).

    Args:
        checkpoint (Mapping): The loaded file.
        name (str): The file, for the log.

    Returns:
        dict: Any of ``num_heads`` (of a custom ``arch`` dict), ``rope``
        (the backbone's ``rope_cfg``), ``abs_pos_embed`` (False for
        ``pos_embed_type='none'``) and ``norm_eps`` (other than the
        default); empty without a config or with none of them.
    """
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    text = meta.get('cfg') if isinstance(meta, Mapping) else None
    model = _assigned(text, 'model') if isinstance(text, str) else None
    backbone = model.get('backbone') if isinstance(model, dict) else None
    if not isinstance(backbone, dict):
        return {}
    settings = {}
    arch = backbone.get('arch')
    if isinstance(arch, dict) and isinstance(arch.get('num_heads'), int):
        settings['num_heads'] = arch['num_heads']
    if isinstance(backbone.get('rope_cfg'), dict):
        settings['rope'] = backbone['rope_cfg']
    if backbone.get('pos_embed_type') == 'none':
        settings['abs_pos_embed'] = False
    norm = backbone.get('norm_cfg')
    eps = norm.get('eps') if isinstance(norm, dict) else None
    if isinstance(eps, float) and eps != DEFAULT_NORM_EPS:
        settings['norm_eps'] = eps
    if settings:
        print_log(
            f'{name}: its config (meta.cfg) gives the backbone {settings}, '
            'which the weights cannot show.',
            logger='current',
        )
    return settings


class _NotLiteral(Exception):
    pass


def _assigned(text, name):
    """The literal value of the top-level ``name = ...`` in ``text``, or
    None (no such assignment, not Python, or not a literal)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            return _literal(node.value)
    return None


def _literal(node):
    """Constants, lists, tuples, dicts and ``dict(key=...)`` calls; any
    other expression inside becomes None."""
    try:
        return _evaluate(node)
    except _NotLiteral:
        return None


def _evaluate(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and all(
        isinstance(k, ast.Constant) for k in node.keys
    ):
        return {k.value: _literal(v) for k, v in zip(node.keys, node.values)}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == 'dict'
        and not node.args
        and all(kw.arg is not None for kw in node.keywords)
    ):
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _evaluate(node.operand)
        if isinstance(value, (int, float)):
            return -value
    raise _NotLiteral
