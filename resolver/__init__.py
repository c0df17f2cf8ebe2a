"""gpuresolve: the PyTorch + CUDA + cuDNN wheels that really run on a machine's driver and GPUs."""

__version__ = "0.1.0"
