"""gpucompat: which ML software stacks work on which GPUs and drivers, and why not."""

__version__ = "0.1.0"
