"""nvdla-sim: a bit-exact, cycle-approximate simulator of the NVIDIA Deep Learning Accelerator."""
__version__ = "0.1.0"

__all__ = ["run", "__version__"]


def __getattr__(name):
    # Lazy: `import nvdla_sim` stays cheap; nvdla_sim.run loads the pipeline on first use.
    if name in ("run", "RunReport"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'nvdla_sim' has no attribute {name!r}")
