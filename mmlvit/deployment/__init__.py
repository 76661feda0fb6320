"""Deployment: a trained classifier as an ONNX graph (image batch -> class
scores) checked in onnxruntime, and the plain classifier config that
mmpretrain's inferencer needs (docs/diagnose_and_deploy.md)."""

from .classifier import DeployableClassifier, load_classifier
from .inference_config import classifier_config
from .onnx_export import OperatorExportError, export_onnx
from .onnx_runtime import compare_with_onnxruntime, measure_latency

__all__ = [
    'DeployableClassifier',
    'OperatorExportError',
    'classifier_config',
    'compare_with_onnxruntime',
    'export_onnx',
    'load_classifier',
    'measure_latency',
]
