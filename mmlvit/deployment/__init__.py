"""Deployment: a trained classifier as an ONNX graph (image batch -> class
scores) checked in onnxruntime, a safetensors + JSON pair that rebuilds it
without config files, and the plain classifier config that
mmpretrain's inferencer needs (docs/diagnose_and_deploy.md)."""

from .classifier import DeployableClassifier, load_classifier
from .inference_config import classifier_config
from .onnx_export import OperatorExportError, export_onnx
from .onnx_runtime import compare_with_onnxruntime, measure_latency
from .portable import export_portable, load_portable

__all__ = [
    'DeployableClassifier',
    'OperatorExportError',
    'classifier_config',
    'compare_with_onnxruntime',
    'export_onnx',
    'export_portable',
    'load_classifier',
    'load_portable',
    'measure_latency',
]
