"""rayscale: run and autoscale Ray clusters on Kubernetes."""

__version__ = "0.1.0"
