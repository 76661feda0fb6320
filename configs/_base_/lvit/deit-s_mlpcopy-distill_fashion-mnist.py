# The DeiT-S transfer recipe on Fashion-MNIST for configs that set their own
# operator and architecture (tools/convert.py writes such configs).
_base_ = ['./deit-s_mlpcopy-distill.py', '../datasets/fashion_mnist_lvit.py']

model = dict(student=dict(head=dict(num_classes=10)))
