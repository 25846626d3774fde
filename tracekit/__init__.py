"""tracekit: where a PyTorch training step's GPU time and memory go, from Nsight Systems traces."""

__version__ = "0.1.0"
