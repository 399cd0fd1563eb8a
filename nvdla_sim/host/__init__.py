"""The host side of a deployment: host profiles (interrupt handling, driver cost, register writes,
the platform's memory), the layer changeover they cause, and end-to-end time beside hardware time.

`profile.load_host_profile(name | path | mapping)`; the engine takes `Engine(..., host=...)` (or the
host its memory profile names) and times every layer changeover with it; `changeover` reports per
layer compute and changeover cycles; `end_to_end` puts hardware and end-to-end time side by side.
"""
from .profile import HostProfile, HostTime, load_host_profile, profile_names

__all__ = ["HostProfile", "HostTime", "load_host_profile", "profile_names"]
