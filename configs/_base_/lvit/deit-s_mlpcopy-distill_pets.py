# The DeiT-S transfer recipe on this dataset for configs that set their own
# operator and architecture (tools/convert.py writes such configs): the grid's
# GLA config, whose student and teacher they replace.
_base_ = ['../../lvit/deit-s_gla_mlpcopy-distill_pets.py']
