"""CSC (stub: built by the convolution-pipeline work)."""
from .base import Unit


class Csc(Unit):
    block = "CSC"
