"""CACC (stub: built by the convolution-pipeline work)."""
from .base import Unit


class Cacc(Unit):
    block = "CACC"
