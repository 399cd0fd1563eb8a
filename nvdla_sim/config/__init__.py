"""Hardware configurations: YAML presets and the validated HardwareConfig."""
from .hardware import HardwareConfig, load_hardware, preset_names

__all__ = ["HardwareConfig", "load_hardware", "preset_names"]
