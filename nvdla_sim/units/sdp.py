"""SDP and SDP_RDMA (stub)."""
from .base import Unit


class SdpRdma(Unit):
    block = "SDP_RDMA"


class Sdp(Unit):
    block = "SDP"
    interrupt = "SDP"
