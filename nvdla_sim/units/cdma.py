"""CDMA (stub: built by the convolution-pipeline work)."""
from .base import Unit


class Cdma(Unit):
    block = "CDMA"
