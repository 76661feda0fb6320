from . import attentions, backbones, distillers, losses, necks  # noqa: F401
