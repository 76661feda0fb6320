"""Component specs: any set of components named as a setting.

A spec is a setting's short name followed by ``+TERM`` (copy these too)
and ``-TERM`` (do not copy these) terms, applied left to right:

- ``mlpcopy+norms``: the MLPs and every LayerNorm;
- ``fullcopy-attn``: FullCopy without qkv and proj (MLPs, LayerNorms,
  embeddings and class token);
- ``random+mlp+embeddings``: the MLPs, patch and position embedding and
  class token.

A term is a component (``components.COMPONENTS``) or a group of
:data:`GROUPS`. ``norms`` as a term is every LayerNorm: the blocks'
(component ``norms``) and the final one (``final_norm``), as the paper's
FullCopy copies both; ``norms-final_norm`` names the blocks' alone. A term
that changes nothing (``mlpcopy+mlp``) is an error: it is a typo or a
misread of the base setting. A bare short name (``mlpcopy``) is that
setting itself.
"""

import re

from .components import COMPONENTS
from .errors import TransferError
from .settings import SETTINGS, Policy

# Named groups of components; a group's name wins over a component's of
# the same name (``norms``).
GROUPS = {
    'embeddings': ('patch_embed', 'pos_embed', 'cls_token'),
    'attn': ('attn_qkv', 'attn_proj'),
    'norms': ('norms', 'final_norm'),
}
_TERM = re.compile(r'([+-])([a-z_]+)')


def term_names() -> list[str]:
    """Every accepted ``+TERM`` / ``-TERM``: the groups, then the
    components."""
    return [*GROUPS, *(c for c in COMPONENTS if c not in GROUPS)]


def _base(spec):
    """(the setting a spec starts with, the rest of the spec); the longest
    short name that ends at ``+``, ``-`` or the end wins, so that
    ``fullcopy-nocls`` is that setting and ``fullcopy-attn`` FullCopy
    without attention."""
    for setting in sorted(
        SETTINGS.values(), key=lambda s: len(s.short_name), reverse=True
    ):
        name = setting.short_name
        if spec.startswith(name) and spec[len(name) : len(name) + 1] in (
            '',
            '+',
            '-',
        ):
            return setting, spec[len(name) :]
    names = ', '.join(s.short_name for s in SETTINGS.values())
    raise TransferError(
        f'Component spec {spec!r} does not start with a setting; start it '
        f'with one of {names}.'
    )


def spec_policy(spec: str) -> Policy:
    """The :class:`Policy` a spec names: its base setting and the
    components it copies (in ``COMPONENTS`` order).

    Args:
        spec (str): e.g. ``'mlpcopy'``, ``'mlpcopy+norms'``,
            ``'fullcopy-attn'``.

    Returns:
        Policy: ``setting`` is the base setting (whose analytical init, if
        any, still runs); ``components`` is the spec's set.

    Raises:
        TransferError: The spec does not start with a setting's short name,
            names an unknown term, has a term that changes nothing, or
            copies a component its base setting initialises analytically.
    """
    setting, rest = _base(spec)
    chosen = set(setting.components)
    terms = _TERM.findall(rest)
    if ''.join(sign + term for sign, term in terms) != rest:
        raise TransferError(
            f'Component spec {spec!r}: cannot read {rest!r}; write terms as '
            f'+NAME or -NAME with NAME one of {", ".join(term_names())}.'
        )
    for sign, term in terms:
        if term not in GROUPS and term not in COMPONENTS:
            raise TransferError(
                f'Component spec {spec!r}: unknown component {term!r}; '
                f'choose from {", ".join(term_names())}.'
            )
        members = set(GROUPS.get(term, (term,)))
        after = chosen | members if sign == '+' else chosen - members
        if after == chosen:
            has = 'already copies' if sign == '+' else 'does not copy'
            raise TransferError(
                f'Component spec {spec!r}: {sign}{term} changes nothing (the '
                f'set before it {has} {sorted(members)}); drop the term.'
            )
        chosen = after
    written = chosen & set(setting.analytical_components)
    if written:
        raise TransferError(
            f'Component spec {spec!r}: {setting.name} initialises '
            f'{sorted(written)} analytically; do not also copy them.'
        )
    return Policy(setting, tuple(c for c in COMPONENTS if c in chosen))


def is_preset(spec: str) -> bool:
    """Whether ``spec`` is a setting's bare short name (no terms)."""
    return any(spec == s.short_name for s in SETTINGS.values())


def components_text(components) -> str:
    """The components as one space-separated word list in ``COMPONENTS``
    order (``'none'`` for the empty set): a CSV cell."""
    ordered = [c for c in COMPONENTS if c in set(components)]
    return ' '.join(ordered) or 'none'
