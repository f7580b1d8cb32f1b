"""ocl-reconciler: a one-shot, declarative reconciler for OpenShift on-cluster layering."""

__version__ = "0.1.0"
