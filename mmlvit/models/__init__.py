from . import attentions, backbones, distillers, losses  # noqa: F401
