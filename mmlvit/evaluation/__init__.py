"""Metrics that mmpretrain lacks (registered in its METRICS)."""

from .subset_accuracy import SubsetAccuracy

__all__ = ['SubsetAccuracy']
