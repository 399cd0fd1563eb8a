"""The report's energy and area: the hook `report/tables.py` calls, and console text.

`attach_energy(rep, prep, result)` fills, from the run's own counts (accounting.py) and the
per-event table (model.py):
  rep.energy_mj (one inference), avg_power_mw, peak_power_mw (highest 1 us window), area_mm2,
  tops_per_w (2 ops per MAC over the run's energy), rep.energy (the per-event table, the SRAM
  macros CACTI priced, the split by component, the area breakdown);
  each DLA row: energy_uj and row.energy {split_uj, counts, pj_per_mac, share}.
Energy in report.json recomputes as sum(counts[k] * energy.pj_per_event[k]) per row.
"""
from __future__ import annotations

from .accounting import RunEnergy, layer_dtype, run_energy
from .cacti import CactiUnavailable
from .model import COMPONENTS, build_model
from ..report.numbers import fixed_or_significant


def energy_model(prep):
    """The per-event model of the scenario's hardware, precisions, DRAM and CVSRAM."""
    scn = prep.scenario
    plan = prep.plan
    dtypes = [plan.dtype] + [layer_dtype(plan, layer) for layer in plan.layers if layer.on_dla]
    return build_model(scn.hardware, dtypes, scn.clock_mhz, scn.memory.dram.name,
                       scn.memory.cvsram_bytes)


def check_energy(prep) -> None:
    """Price the SRAMs before the run: a macro CACTI rejects (a small CBUF split into many banks:
    "no valid data array organizations") is refused before the engine starts, not after the
    whole network ran.  The report's pricing after the run reads the same cached results."""
    try:
        energy_model(prep)
    except CactiUnavailable:              # the report says why energy is absent
        pass


def energy_of(prep, result) -> RunEnergy:
    return run_energy(energy_model(prep), prep.plan, result.layers, result.total_cycles)


def attach_energy(rep, prep, result) -> RunEnergy | None:
    if result is None:
        return None
    try:
        run = energy_of(prep, result)
    except CactiUnavailable as exc:       # the run's other results stand; say why energy is absent
        rep.energy = {"unavailable": str(exc)}
        return None
    model = run.model
    total_pj = run.total_pj
    by_row = {r.row: r for r in run.rows}
    for row in rep.rows:
        e = by_row.get(row.layer)
        if e is None or row.device != "DLA":
            continue
        row.energy_uj = e.pj * 1e-6
        row.energy = {"split_uj": {k: v * 1e-6 for k, v in e.split_pj.items() if v},
                      "counts": dict(e.counts),
                      "pj_per_mac": e.pj / row.macs if row.macs else None,
                      "share": e.pj / total_pj if total_pj else None}
    seconds = run.total_cycles / (model.clock_mhz * 1e6) if run.total_cycles else 0.0
    rep.energy_mj = total_pj * 1e-9
    rep.avg_power_mw = total_pj * 1e-12 / seconds * 1e3 if seconds else None
    rep.peak_power_mw = run.peak_power_mw()
    rep.area_mm2 = model.area["total_mm2"]
    macs = rep.total_macs
    rep.tops_per_w = 2 * macs / (total_pj * 1e-12) / 1e12 if total_pj else None
    split = run.split_pj()
    rep.energy = {**model.as_dict(),
                  "split_uj": {k: v * 1e-6 for k, v in split.items()},
                  "share": {k: v / total_pj for k, v in split.items()} if total_pj else {},
                  "idle_leakage_uj": run.idle_leak_pj * 1e-6,
                  "pj_per_mac": total_pj / macs if macs else None,
                  "area_mm2": dict(model.area)}
    return run


def console_lines(rep) -> list[str]:
    if getattr(rep, "energy_mj", None) is None:
        why = (getattr(rep, "energy", None) or {}).get("unavailable")
        return [f"energy: not computed ({why})"] if why else []
    e = rep.energy
    share = e.get("share", {})
    parts = ", ".join(f"{k} {100 * share[k]:.0f}%" for k in COMPONENTS if share.get(k, 0) >= 0.005)
    batch = getattr(rep, "batch", 1)
    per = "per inference" if batch == 1 else \
        f"for the batch of {batch} ({fixed_or_significant(rep.energy_mj / batch)} mJ per image)"
    mj = fixed_or_significant(rep.energy_mj)
    lines = [f"energy: {mj} mJ {per} ({parts}); "
             f"{e['pj_per_mac']:.2f} pJ/MAC" if e.get("pj_per_mac") else
             f"energy: {mj} mJ {per} ({parts})"]
    power = f"power: {rep.avg_power_mw:.0f} mW average" if rep.avg_power_mw else "power: -"
    power += f", {rep.peak_power_mw:.0f} mW peak (1 us)"
    if rep.tops_per_w:
        power += f"; {rep.tops_per_w:.2f} TOPS/W at {rep.clock_mhz:g} MHz"
    lines.append(power)
    a = e["area_mm2"]
    lines.append(f"area: {rep.area_mm2:.2f} mm^2 at {e['technology_nm']:g} nm (SRAM "
                 f"{a['sram_mm2']:.2f}, logic {a['logic_mm2']:.2f}; DRAM {e['dram_type']}; "
                 "SRAM + datapaths only, docs/energy.md)")
    return lines


def csv_values(row) -> dict:
    """Per-row energy columns for report.csv."""
    split = (getattr(row, "energy", None) or {}).get("split_uj", {})
    out = {"energy_uj": getattr(row, "energy_uj", None)}
    for c in COMPONENTS:
        out[f"energy_{c.lower()}_uj"] = split.get(c, 0.0) if out["energy_uj"] is not None else None
    return out


CSV_COLUMNS = ("energy_uj",) + tuple(f"energy_{c.lower()}_uj" for c in COMPONENTS)
