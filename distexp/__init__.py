"""distexp: configurable experiments with TensorFlow distribution strategies, tracked in MLflow."""
__version__ = "0.1.0"
