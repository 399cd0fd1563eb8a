"""Energy and area (nvdla_sim/energy, docs/energy.md): CACTI wrapper and cache, constants and
their overrides, per-layer accounting against independent counts, report columns and sweeps."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.energy import cacti
from nvdla_sim.energy.cacti import SramCost, SramGeometry, parse_cacti_csv, sram_cost
from nvdla_sim.energy.model import COMPONENTS, build_model
from nvdla_sim.energy.table import load_table
from nvdla_sim.energy.technology import energy_scale
from nvdla_sim.errors import NvdlaSimError

ROOT = Path(__file__).resolve().parents[1]
needs_cacti = pytest.mark.skipif(not cacti.cacti_available(),
                                 reason="zigzag-dse's CACTI binary is not installed or cannot run")


@pytest.fixture(scope="module", autouse=True)
def cacti_cache(tmp_path_factory):
    """Every test of this module caches CACTI results in its own folder."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NVDLA_SIM_CACHE", str(tmp_path_factory.mktemp("nvdla-cache")))
    yield
    mp.undo()


@pytest.fixture
def fake_cacti(monkeypatch, tmp_path):
    """CACTI replaced by a size/width formula; counts its calls; a fresh cache."""
    calls = []

    def run(geom, node_nm, cell):
        calls.append((geom.depth, geom.width_bytes, geom.banks, node_nm, cell))
        kib = geom.bytes / 1024
        return SramCost(0.1 * geom.width_bytes * (1 + kib / 64), 0.2 * geom.width_bytes,
                        0.01 * kib, 0.002 * kib * geom.banks ** 0.1, "fake")
    monkeypatch.setattr(cacti, "run_cacti", run)
    monkeypatch.setattr(cacti, "_memo", {})
    monkeypatch.setenv("NVDLA_SIM_CACHE", str(tmp_path))
    return calls


# -- nodes, constants, overrides ------------------------------------------------------------------
def test_technology_node_field():
    assert load_hardware("nv_large").technology_nm == 28
    assert load_hardware({"preset": "nv_full", "technology_nm": 16}).technology_nm == 16
    for bad in (7, 200, "x", float("nan")):
        with pytest.raises(NvdlaSimError, match=r"^technology_nm: CACTI models 22-180 nm"):
            load_hardware({"preset": "nv_large", "technology_nm": bad})


def test_node_scaling_rule():
    # C ~ L and C V^2 with CACTI's itrs-hp supplies: 45 nm 1.0 V, 22 nm 0.8 V.
    assert energy_scale(22, 45) == pytest.approx(22 / 45 * 0.64)
    assert energy_scale(45, 45) == 1.0
    assert energy_scale(16, 22) == pytest.approx(16 / 22)       # supply held below 22 nm


def test_mac_energy_per_precision():
    t = load_table()
    e = {p: t.mac_pj(p, 45) for p in ("INT4", "INT8", "INT16", "FP16")}
    # Horowitz 2014 at 45 nm: 8b mult 0.2 + 16b add 0.05; FP16 mult 1.1 + FP32 add 0.9.
    assert e["INT8"] == pytest.approx(0.25)
    assert e["FP16"] == pytest.approx(2.0)
    assert e["INT16"] == pytest.approx(0.2 * 4 + 0.1)
    assert e["INT4"] < e["INT8"] < e["INT16"] < e["FP16"]
    # the multiplier rule reproduces the published 32-bit point within 4 %
    assert t.energy_pj("int_mult_32x32", 45) == pytest.approx(3.1, rel=0.04)
    assert t.mac_pj("INT8", 28) == pytest.approx(0.25 * energy_scale(28, 45))
    with pytest.raises(NvdlaSimError, match="precision 'INT32'"):
        t.mac_pj("INT32", 28)


@pytest.mark.parametrize("text, field", [
    ("logic_pj_45nm: {int_mult_8: -0.2}\n", "logic_pj_45nm.int_mult_8"),
    ("logic_pj_45nm: {fp_add_16: .nan}\n", "logic_pj_45nm.fp_add_16"),
    ("dram_pj_per_bit: {ddr4: -1}\n", "dram_pj_per_bit.ddr4"),
    ("logic_leakage_mw_per_mm2: -3\n", "logic_leakage_mw_per_mm2"),
    ("dram_type: gddr9\n", "dram_type"),
    ("mac_pj: 1\n", "mac_pj"),
])
def test_bad_energy_overrides(tmp_path, text, field):
    p = tmp_path / f"e{abs(hash(text))}.yaml"
    p.write_text(text)
    with pytest.raises(NvdlaSimError) as exc:
        load_table(p)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg and str(p) in msg


def test_energy_override_replaces_a_constant(tmp_path):
    p = tmp_path / "hbm.yaml"
    p.write_text("dram_type: hbm2\nlogic_pj_45nm: {int_mult_8: 0.4}\n")
    t = load_table(p)
    assert t.dram_pj_bit("dram") == 3.9
    assert t.mac_pj("INT8", 45) == pytest.approx(0.4 + 0.05)
    assert load_table().dram_pj_bit("dram") == 15.0


# -- CACTI ------------------------------------------------------------------------------------------
CACTI_OUT = (
    "Tech node (nm), Capacity (bytes), Number of banks, Associativity, Output width (bits), "
    "Access time (ns), Random cycle time (ns), Dynamic search energy (nJ), Dynamic read energy "
    "(nJ), Dynamic write energy (nJ), Standby leakage per bank(mW), Area (mm2), Ndwl,\n"
    "28, 32768, 2, 1, 512, 0.55, 0.64, N/A, 0.0349302, 0.0761378, 1.5, 0.299934, 2,\n")


def test_parse_cacti_csv():
    c = parse_cacti_csv(CACTI_OUT)
    assert (c.read_pj, c.write_pj) == pytest.approx((34.9302, 76.1378))
    assert c.leakage_mw == pytest.approx(3.0)             # per bank x 2 banks
    assert c.area_mm2 == pytest.approx(0.299934)
    with pytest.raises(NvdlaSimError, match="no result"):
        parse_cacti_csv("header only\n")


def test_cacti_results_are_cached_by_geometry(fake_cacti, tmp_path):
    g = SramGeometry("CBUF", 8192, 64, banks=16)
    a = sram_cost(g, 28)
    b = sram_cost(g, 28)
    assert a == b and len(fake_cacti) == 1
    files = list((tmp_path / "cacti").glob("*.json"))
    assert len(files) == 1
    cacti._memo.clear()                                    # a new process: read from disk
    assert sram_cost(g, 28) == a and len(fake_cacti) == 1
    sram_cost(SramGeometry("CBUF", 16384, 64, banks=32), 28)
    assert len(fake_cacti) == 2


def test_16nm_runs_cacti_at_22nm_and_scales(fake_cacti):
    g = SramGeometry("x", 1024, 32)
    c16, c22 = sram_cost(g, 16), sram_cost(g, 22)
    assert [c[3] for c in fake_cacti] == [22, 22]
    assert c16.read_pj == pytest.approx(c22.read_pj * 16 / 22)
    assert c16.area_mm2 == pytest.approx(c22.area_mm2 * (16 / 22) ** 2)
    assert "scaled to 16 nm" in c16.source


def test_geometry_cacti_cannot_model(fake_cacti):
    with pytest.raises(NvdlaSimError, match=r"^cbuf.bank_depth: CACTI cannot model a 1 x 8-byte"):
        sram_cost(SramGeometry("CBUF", 1, 8, field="cbuf.bank_depth"), 28)
    with pytest.raises(NvdlaSimError, match="energy table sram_cell"):
        sram_cost(SramGeometry("CBUF", 64, 8), 28, cell="itrs-xx")
    assert not fake_cacti


@needs_cacti
def test_real_cacti_32kib_sram():
    cacti._memo.clear()
    c = cacti.run_cacti(SramGeometry("bank", 512, 64), 22, "itrs-lstp")
    assert 1 < c.read_pj < 200 and 1 < c.write_pj < 200
    assert 0.01 < c.area_mm2 < 1 and c.leakage_mw > 0


@needs_cacti
def test_cacti_rejects_a_geometry_in_one_line():
    # three 64-byte entries: CACTI finds no valid data-array organisation
    with pytest.raises(NvdlaSimError) as exc:
        sram_cost(SramGeometry("CBUF", 3, 64, field="cbuf.bank_depth"), 28)
    msg = str(exc.value)
    assert msg.startswith("cbuf.bank_depth: CACTI rejects a 3 x 64-byte CBUF") and "\n" not in msg


# -- accounting in a run ----------------------------------------------------------------------------
def _run(tmp_path: Path, name: str, **over):
    from nvdla_sim.scenario import runner
    from nvdla_sim.scenario.schema import load_scenario, parse_scenario
    import yaml
    data = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text())
    for k, v in over.items():
        data[k] = v
    data["outputs"] = {"directory": str(tmp_path), "formats": ["json", "csv"]}
    scn = parse_scenario(data, ROOT / "scenarios")
    prep = runner.prepare(scn)
    return prep, runner.execute(prep, tmp_path)


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    if not cacti.cacti_available():
        pytest.skip("zigzag-dse's CACTI binary is not installed or cannot run")
    out = tmp_path_factory.mktemp("lenet")
    prep, rep = _run(out, "lenet5_nv_large", mode="timing")
    return prep, rep, out


def test_split_sums_to_total(lenet):
    _, rep, _ = lenet
    e = rep.energy
    assert rep.energy_mj > 0
    assert sum(e["split_uj"].values()) * 1e-3 == pytest.approx(rep.energy_mj, rel=1e-12)
    dla = [r for r in rep.rows if r.device == "DLA"]
    assert all(r.energy_uj and r.energy_uj > 0 for r in dla)
    assert (sum(r.energy_uj for r in dla) + e["idle_leakage_uj"]) * 1e-3 == \
        pytest.approx(rep.energy_mj, rel=1e-12)
    for r in dla:
        assert sum(r.energy["split_uj"].values()) == pytest.approx(r.energy_uj, rel=1e-12)
    assert set(e["split_uj"]) == set(COMPONENTS)
    seconds = rep.total_cycles / (rep.clock_mhz * 1e6)
    assert rep.avg_power_mw == pytest.approx(rep.energy_mj * 1e-3 / seconds * 1e3)
    assert rep.peak_power_mw >= rep.avg_power_mw * 0.999
    assert rep.tops_per_w == pytest.approx(2 * rep.total_macs / (rep.energy_mj * 1e-3) / 1e12)


def test_layer_energy_recomputes_from_report_json(lenet):
    _, rep, out = lenet
    doc = json.loads((out / "report.json").read_text())
    for key in ("energy_mj", "avg_power_mw", "peak_power_mw", "area_mm2", "tops_per_w"):
        assert isinstance(doc[key], float) and doc[key] > 0
    pj = doc["energy"]["pj_per_event"]
    for row in doc["rows"]:
        if row["device"] != "DLA":
            continue
        again = sum(n * pj[k] for k, n in row["energy"]["counts"].items())
        assert again * 1e-6 == pytest.approx(row["energy_uj"], rel=1e-9)
        dram = row["energy"]["counts"].get("dram_bit", 0)
        assert dram == 8 * row["dram_bytes"]
    with open(out / "report.csv") as f:
        rows = list(csv.DictReader(f))
    assert "energy_uj" in rows[0] and "energy_dram_uj" in rows[0]
    assert float(rows[0]["energy_uj"]) == pytest.approx(doc["rows"][0]["energy_uj"])


def test_conv_counts_match_an_independent_count(lenet):
    """CBUF reads, MACs and CACC accumulations of each direct convolution, from the NVDLA
    dataflow written out here: an atomic operation reads one data entry; per stripe and per
    (kernel position, channel block) the kernel group's weights are loaded once."""
    prep, rep, _ = lenet
    from nvdla_sim.energy.accounting import layer_counts
    hw = prep.scenario.hardware
    plan = prep.plan
    checked = 0
    for layer in plan.layers:
        c = layer.conv
        if c is None or c.in_channels <= 4:              # image input folds the kernel width
            continue
        blocks = math.ceil(c.in_channels / hw.atomic_c)
        groups = math.ceil(c.out_channels / hw.atomic_k)
        pixels = c.out_h * c.out_w
        full, half, left, stripes = 2 * hw.atomic_k, hw.atomic_k, pixels, 0
        while left > 0:
            left -= full if left >= 2 * full else (half if left > full else left)
            stripes += 1
        positions = c.kernel[0] * c.kernel[1]
        atomic_ops = blocks * positions * pixels * groups
        kernels = c.out_channels
        weight_reads = blocks * positions * stripes * math.ceil(
            kernels * hw.atomic_c / hw.cbuf.bank_width_bytes) if groups == 1 else None
        got = layer_counts(hw, plan, layer, None)
        assert got["mac.INT8"] == c.macs
        assert got["cacc_add.INT8"] == blocks * positions * pixels * c.out_channels
        if weight_reads is not None:
            assert got["cbuf_read"] == atomic_ops + weight_reads
        written = c.in_channels * c.in_h * c.in_w + c.out_channels * c.in_channels * positions
        assert got["cbuf_write"] == math.ceil(written / hw.cbuf.bank_width_bytes)
        checked += 1
    assert checked >= 2


def test_event_prices_come_from_cacti_and_the_table(lenet):
    prep, rep, _ = lenet
    hw = prep.scenario.hardware
    m = build_model(hw, INT8, 1000.0, "dram")
    cb = sram_cost(SramGeometry("CBUF", hw.cbuf.banks * hw.cbuf.bank_depth,
                                hw.cbuf.bank_width_bytes, banks=hw.cbuf.banks), 28)
    assert m.pj["cbuf_read"] == cb.read_pj and m.pj["cbuf_write"] == cb.write_pj
    assert m.pj["mac.INT8"] == pytest.approx(load_table().mac_pj("INT8", 28))
    assert m.pj["dram_bit"] == 15.0
    assert rep.energy["pj_per_event"] == m.pj
    assert m.area["total_mm2"] == pytest.approx(m.area["sram_mm2"] + m.area["logic_mm2"])


@needs_cacti
def test_16bit_precisions_charge_their_macs(tmp_path):
    hw = load_hardware("nv_full")
    m = build_model(hw, (INT8, INT16, FP16), 1000.0)
    assert m.pj["mac.INT8"] < m.pj["mac.INT16"] < m.pj["mac.FP16"]
    assert m.pj["cacc_abuf_read.INT16"] != m.pj["cacc_abuf_read.INT8"]   # 48-bit assembly macros
    assert m.pj["cacc_abuf_read.INT16"] == m.pj["cacc_abuf_read.FP16"]
    with pytest.raises(NvdlaSimError, match="nv_large has no INT16 datapath"):
        build_model(load_hardware("nv_large"), INT16, 1000.0)
    prep, rep = _run(tmp_path, "lenet5_nv_full_fp16", mode="timing")
    assert "FP16" in rep.energy["precisions"] and rep.energy_mj > 0
    assert rep.energy["operators"]["mac.FP16"] == "fp_mult_16+fp_add_32"
    counts = [r.energy["counts"] for r in rep.rows if r.energy and r.macs]
    assert counts and all("mac.FP16" in c and "mac.INT8" not in c for c in counts)


@pytest.fixture(scope="module")
def resnet50(tmp_path_factory):
    """ResNet-50 on nv_large (16 banks), timing only."""
    if not cacti.cacti_available():
        pytest.skip("zigzag-dse's CACTI binary is not installed or cannot run")
    return _run(tmp_path_factory.mktemp("r50"), "resnet50_nv_large", mode="timing")


@needs_cacti
def test_doubling_cbuf_banks_resnet50(tmp_path, resnet50):
    """8 -> 16 CBUF banks: CACTI's CBUF area and energy per access rise; ResNet-50's DRAM
    bytes and DRAM energy do not.  (16 -> 32 moves 0.05 % more: stride-2 1x1 layers whose input
    then fits are fetched whole, odd lines included -- docs/energy.md.)"""
    _, small = _run(tmp_path, "resnet50_nv_large", mode="timing",
                    hardware={"preset": "nv_large", "cbuf": {"banks": 8}})
    reps = [small, resnet50[1]]
    assert resnet50[0].scenario.hardware.cbuf.banks == 16
    a, b = (r.energy for r in reps)
    assert b["sram"]["CBUF"]["area_mm2"] > a["sram"]["CBUF"]["area_mm2"]
    assert b["pj_per_event"]["cbuf_read"] > a["pj_per_event"]["cbuf_read"]
    assert b["pj_per_event"]["cbuf_write"] > a["pj_per_event"]["cbuf_write"]
    assert reps[1].total_dram_bytes <= reps[0].total_dram_bytes
    assert b["split_uj"]["DRAM"] <= a["split_uj"]["DRAM"]
    assert reps[1].area_mm2 > reps[0].area_mm2


# -- sweeps -----------------------------------------------------------------------------------------
def test_sweep_energy_columns_and_pareto():
    from nvdla_sim.sweep.plots import pareto_3d
    from nvdla_sim.sweep.results import metric_columns

    class Scn:
        clock_mhz = 1000.0

        class hardware:
            macs = 2048
    out = metric_columns({"cycles": 2e6, "dram_bytes": 10, "energy_mj": 3.0, "area_mm2": 1.5,
                          "avg_power_mw": 1500.0}, Scn, {})
    assert out["ms"] == 2.0 and out["edp"] == pytest.approx(6.0)
    assert out["energy_mj"] == 3.0 and out["area_mm2"] == 1.5
    rows = [{"ms": 1, "energy_mj": 5, "area_mm2": 3}, {"ms": 2, "energy_mj": 4, "area_mm2": 3},
            {"ms": 2, "energy_mj": 5, "area_mm2": 3}, {"ms": 3, "energy_mj": 6, "area_mm2": 1}]
    assert pareto_3d(rows) == [rows[0], rows[1], rows[3]]


def test_sweep_energy_plots(tmp_path):
    from nvdla_sim.sweep.plots import plot_all
    rows = []
    for i, banks in enumerate((4, 8, 16, 32)):
        for gbps in (5, 10):
            dram = 4.0 / (1 + i) + 1
            rows.append({"status": "ok", "network": "resnet50", "cbuf_banks": banks,
                         "dram_gbps": gbps, "cbuf_kib": banks * 32, "ms": 10 / gbps + 1 / banks,
                         "area_proxy": 2048 + banks * 128, "area_mm2": 0.5 + 0.07 * banks,
                         "energy_mj": dram + 0.02 * banks, "energy_dram_mj": dram,
                         "energy_cbuf_mj": 0.02 * banks, "cvsram_bytes": 0,
                         "dram_bytes": int(dram * 1e6), "key": f"k{i}{gbps}", "params": {}})
    files = plot_all(rows, tmp_path, "t")
    names = {f.name for f in files}
    assert {"energy_vs_area.png", "energy_vs_cbuf.png", "pareto.csv"} <= names
    with open(tmp_path / "pareto.csv") as f:
        front = list(csv.DictReader(f))
    assert front and all(r["network"] == "resnet50" for r in front)


def test_zigzag_peer_agrees_on_a_1x1_layer(resnet50):
    """ZigZag, given nv_large and the same per-access energies, counts the same CBUF accesses
    and (within 1 %) the same DRAM traffic and energy for res5b_branch2a (docs/energy.md)."""
    pytest.importorskip("zigzag.api", reason="zigzag-dse (and six) not installed")
    if not cacti.cacti_available():
        pytest.skip("zigzag-dse's CACTI binary is not installed or cannot run")
    from nvdla_sim.energy.zigzag_check import run
    (r,) = run(["res5b_branch2a"], prep=resnet50[0], report=resnet50[1])
    assert r["zz_macs"] == r["macs"]
    assert r["zz_reads_writes"]["cbuf"] == [r["sim_cbuf_reads"], r["sim_cbuf_writes"]]
    zz_dram_bits = sum(r["zz_reads_writes"]["dram"]) * 256
    assert zz_dram_bits == pytest.approx(r["sim_dram_bits"], rel=0.01)
    assert r["zz_total_uj"] == pytest.approx(r["sim_total_uj"], rel=0.01)
