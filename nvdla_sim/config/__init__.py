"""Hardware configurations: YAML presets and the validated HardwareConfig."""
from .hardware import HardwareConfig, load_hardware, preset_names, replay_options

__all__ = ["HardwareConfig", "load_hardware", "preset_names", "replay_options"]
