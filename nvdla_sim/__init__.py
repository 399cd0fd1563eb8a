"""nvdla-sim: a bit-exact, cycle-approximate simulator of the NVIDIA Deep Learning Accelerator."""
__version__ = "0.1.0"
