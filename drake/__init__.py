"""DRAKE: benchmark and dataset-construction suite for personalized federated learning."""

__version__ = "0.1.0"
