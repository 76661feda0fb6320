# The DeiT-S transfer recipe on your own image folders for configs that set
# their own operator and architecture (tools/convert.py --dataset folder
# writes such configs, with data_root and the head's classes).
_base_ = ['./deit-s_mlpcopy-distill.py', '../datasets/image_folder_lvit.py']
