"""CMAC_A / CMAC_B (stub: built by the convolution-pipeline work)."""
from .base import Unit


class CmacA(Unit):
    block = "CMAC_A"


class CmacB(Unit):
    block = "CMAC_B"
