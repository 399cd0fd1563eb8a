"""One module per NVDLA hardware unit; each unit is a SimPy process (see base.Unit)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Unit

if TYPE_CHECKING:
    from ..engine import Engine


def build_units(engine: "Engine") -> dict[str, Unit]:
    from .cdma import Cdma
    from .csc import Csc
    from .cmac import CmacA, CmacB
    from .cacc import Cacc
    from .sdp import Sdp, SdpRdma
    from .pdp import Pdp, PdpRdma
    from .cdp import Cdp, CdpRdma
    classes = [Cdma, Csc, CmacA, CmacB, Cacc, SdpRdma, Sdp, PdpRdma, Pdp, CdpRdma, Cdp]
    if engine.hw.features.bdma:
        from .bdma import Bdma
        classes.append(Bdma)
    if engine.hw.features.rubik:
        from .rubik import Rubik
        classes.append(Rubik)
    return {cls.block: cls(engine) for cls in classes}
