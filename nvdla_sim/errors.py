"""Errors that reach the user as one line (no traceback)."""


class NvdlaSimError(Exception):
    """A user's input or configuration is wrong; the message names the file, line or field."""


class UnsupportedError(NvdlaSimError):
    """The registers ask for a hardware feature this simulator does not model (yet)."""
