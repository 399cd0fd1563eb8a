"""PDP and PDP_RDMA (stub)."""
from .base import Unit


class PdpRdma(Unit):
    block = "PDP_RDMA"


class Pdp(Unit):
    block = "PDP"
    interrupt = "PDP"
