"""CDP and CDP_RDMA (stub)."""
from .base import Unit


class CdpRdma(Unit):
    block = "CDP_RDMA"


class Cdp(Unit):
    block = "CDP"
    interrupt = "CDP"
