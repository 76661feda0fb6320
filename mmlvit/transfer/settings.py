"""The initialisation settings: one table, one row per setting.

A setting copies a set of components (see ``components.py``) from a
softmax checkpoint, optionally after an analytical init of the attention
(Mimetic, arXiv:2305.09828; Impulse, Zheng et al. NeurIPS 2025). Random,
Copy, MLPCopy and FullCopy are the paper's settings (Qin et al.,
arXiv:2609.35745); its Variant1-3 are the FullCopy variants below, under
names that say what they leave out. Every setting that copies also copies
the layer scales (``layer_scale``, DeiT III's ``ls1``/``ls2``) where the
checkpoint has them: they set the size of each residual branch, which the
copied MLPs expect and the distilled attention outputs (recorded before the
scale) are matched under; and the attention-pooling neck (``attn_pool``,
SigLIP's MAP head): it pools with softmax over the tokens (cost O(N)), so
it is no attention to replace, and the head reads what it pools. Random
leaves it at its init. An operator's own settings register
themselves with :func:`register_setting`: TTTFullCopy, FullCopy plus T5's
full inheritance into the TTT operator's extra head and wider ``proj``
(``ttt_inheritance.py``, with its copy rules).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch.nn as nn

from .analytical import impulse_init_, mimetic_init_
from .components import COMPONENTS
from .errors import TransferError


@dataclass(frozen=True)
class Setting:
    """One initialisation setting.

    Attributes:
        name (str): What configs pass as ``setting``.
        short_name (str): Lower-case name used in config file names and by
            the tools (``'attncopy'`` for Copy).
        components (tuple[str]): Components copied from the checkpoint.
        analytical (callable, optional): In-place analytical init of the
            backbone, run before copying; returns ``(name, numel)`` of every
            tensor it wrote.
        analytical_components (tuple[str]): Components the analytical init
            writes (they may not also be copied).
        aliases (tuple[str]): Other accepted names (the paper's).
    """

    name: str
    short_name: str
    components: tuple[str, ...] = ()
    analytical: Callable[[nn.Module], list] | None = None
    analytical_components: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    """A resolved initialisation policy (``policies.resolve_policy``).

    Attributes:
        setting (Setting): The setting (:data:`SETTINGS`).
        components (tuple[str]): Components copied from the checkpoint (the
            setting's own or the explicit list).
    """

    setting: Setting
    components: tuple[str, ...]

    @property
    def analytical(self) -> Callable | None:
        """The in-place analytical init (Mimetic/Impulse) or None."""
        return self.setting.analytical


def _full_copy_without(*left_out):
    return tuple(c for c in COMPONENTS if c not in ('head', *left_out))


SETTINGS = {
    s.name: s
    for s in (
        Setting('Random', 'random'),
        Setting(
            'Mimetic',
            'mimetic',
            analytical=mimetic_init_,
            analytical_components=('attn_qkv', 'attn_proj'),
        ),
        Setting(
            'Impulse',
            'impulse',
            analytical=impulse_init_,
            analytical_components=('attn_qkv', 'attn_proj', 'pos_embed'),
        ),
        Setting(
            'Copy',
            'attncopy',
            ('attn_qkv', 'attn_proj', 'layer_scale', 'attn_pool'),
        ),
        Setting('MLPCopy', 'mlpcopy', ('mlp', 'layer_scale', 'attn_pool')),
        Setting('FullCopy', 'fullcopy', _full_copy_without()),
        Setting(
            'FullCopyNoClsToken',
            'fullcopy-nocls',
            _full_copy_without('cls_token'),
            aliases=('Variant1',),
        ),
        Setting(
            'FullCopyNoClsTokenPosEmbed',
            'fullcopy-noclspos',
            _full_copy_without('cls_token', 'pos_embed'),
            aliases=('Variant2',),
        ),
        Setting(
            'FullCopyNoEmbeddings',
            'fullcopy-noembed',
            _full_copy_without('cls_token', 'pos_embed', 'patch_embed'),
            aliases=('Variant3',),
        ),
    )
}


def register_setting(setting: Setting) -> None:
    """Add ``setting`` to :data:`SETTINGS` (after the others).

    Raises:
        ValueError: A setting already has that name.
    """
    if setting.name in SETTINGS:
        raise ValueError(f'A setting is already named {setting.name!r}.')
    SETTINGS[setting.name] = setting


def get_setting(name: str) -> Setting:
    """The :class:`Setting` a name or alias names.

    Raises:
        TransferError: No setting has that name.
    """
    for setting in SETTINGS.values():
        if name == setting.name or name in setting.aliases:
            return setting
    names = [
        n if not s.aliases else f'{n} ({"/".join(s.aliases)})'
        for n, s in SETTINGS.items()
    ]
    raise TransferError(
        f'Unknown init setting {name!r}; choose from {", ".join(names)}.'
    )


def setting_names() -> list[str]:
    """Every accepted name: the settings' own, then the aliases."""
    return [*SETTINGS] + [a for s in SETTINGS.values() for a in s.aliases]
