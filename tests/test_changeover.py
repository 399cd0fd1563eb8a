"""Layer changeover and host profiles (issue 16): the engine's host between layers, the host and
memory profile files, and hardware vs end-to-end time.

References are computed here from the program's own commands and the profile's numbers: which
writes fall between a layer's interrupt and the next first OP_ENABLE, how many interrupts the host
clears, the CSB request FIFO rate (depth / round trip) and the poll window."""
from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_sim.engine import Engine
from nvdla_sim.engine.memif import load_memory_profile
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.host import load_host_profile, profile_names
from nvdla_sim.host.changeover import format_layer_rows, layer_rows, program_ahead
from nvdla_sim.program import IntrNotify, RegWrite, SyncWait

REPO = Path(__file__).resolve().parent.parent
FIFO_RATE = 10 / 4          # params.yaml csb.program_fifo_round_trip_cycles / program_fifo_depth


@pytest.fixture(scope="module")
def lenet():
    """LeNet-5 on nv_small compiled to one register program (timing only) and its context."""
    from nvdla_sim.compiler.lower import lower
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(REPO / "scenarios" / "lenet5_nv_small.yaml")
    scn.mode = "timing-only"
    prep = prepare(scn)
    ctx = context(prep)
    return lower(prep.plan, ctx, name="lenet5").program, ctx, prep


def _is_enable(cmd) -> bool:
    return isinstance(cmd, RegWrite) and cmd.name.endswith("D_OP_ENABLE") and cmd.value & 1


def _changeover_writes(program) -> list[tuple[int, int]]:
    """Per changeover: (interrupts waited for, register writes before the next OP_ENABLE)."""
    out, ids, writes, waiting = [], set(), 0, False
    for cmd in program.commands:
        if isinstance(cmd, SyncWait):
            if not waiting:
                ids, writes, waiting = set(), 0, True
            ids.add(cmd.sync_id)
        elif waiting and _is_enable(cmd):
            out.append((len(ids), writes))
            waiting = False
        elif waiting and isinstance(cmd, RegWrite):
            writes += 1
    return out


def test_testbench_changeover_is_poll_clear_and_fifo_paced_writes(lenet):
    program, ctx, _ = lenet
    result = Engine(ctx.hw, "rtl_testbench", ctx.clock_mhz, compute_values=False).run(program)
    expected = _changeover_writes(program)
    launches = result.launches
    assert len(launches) == len(expected) + 1 == 4
    for launch, (interrupts, writes) in zip(launches, expected):
        detect = launch.detected - launch.interrupt
        assert 5 <= detect < 5 + 36                 # inside one poll round after the interrupt
        # every interrupt of the layer was seen; the last one ends the layer
        assert launch.interrupts == interrupts
        # the clear of the last interrupt, then the next layer's writes, at the FIFO's rate
        assert launch.changeover_cycles == pytest.approx(detect + (1 + writes) * FIFO_RATE)
        assert launch.writes == writes + interrupts
    rows = layer_rows(launches)
    assert rows[-1].changeover_cycles is None and "last" in rows[-1].why
    text = format_layer_rows(rows, ["conv1", "conv2", "ip1", "ip2"])
    assert "conv1" in text and "register writes" in text


def test_unit_cycles_do_not_depend_on_the_host(lenet):
    """Changeover lies between layers: each layer's own cycles (first OP_ENABLE -> interrupt) are
    the same with no host (sync_waits free) and with the testbench host."""
    program, ctx, _ = lenet
    bare = Engine(ctx.hw, "rtl_testbench", ctx.clock_mhz, compute_values=False, host=None)
    bare.run(program)
    hosted = Engine(ctx.hw, "rtl_testbench", ctx.clock_mhz, compute_values=False)
    result = hosted.run(program)
    assert bare.launches == []
    # interrupts of one layer keep their distance from each other and from the layer's start
    shift = [h - b for (h, *_), (b, *_) in zip(hosted.glb.raised, bare.glb.raised)]
    per_layer = {}
    for (cycle, src, grp), d in zip(hosted.glb.raised, shift):
        layer = sum(1 for launch in result.launches if launch.start <= cycle) - 1
        per_layer.setdefault(layer, set()).add(d)
    assert all(len(ds) == 1 for ds in per_layer.values())
    shifts = [per_layer[k].pop() for k in sorted(per_layer)]
    # (the first layer's programming streams through the CSB FIFO too: a constant shift)
    assert shifts == sorted(shifts) and shifts[-1] > shifts[0]   # later ones wait for the host


def test_program_ahead_hides_the_programming(lenet):
    program, ctx, _ = lenet
    host = {"name": "ahead", "interrupt": "irq", "interrupt_latency_cycles": 100,
            "register_read_cycles": 7, "register_write_cycles": 1, "driver_per_layer_cycles": 50,
            "program_ahead": True}
    result = Engine(ctx.hw, "rtl_testbench", ctx.clock_mhz, compute_values=False,
                    host=host).run(program)
    expected = _changeover_writes(program)
    for i, (launch, (interrupts, writes)) in enumerate(zip(result.launches, expected)):
        nxt = result.launches[i + 1]
        assert nxt.ahead_writes == writes           # all programming went into the idle group
        # latency, the handler's two reads, one W1C clear per interrupt, the driver's work
        assert launch.changeover_cycles == pytest.approx(100 + 2 * 7 + FIFO_RATE + 50)
        assert launch.interrupts == interrupts
    # the reordered program still writes every register once and in the same order per unit
    moved = program_ahead(program)
    assert sorted(map(id, moved.commands)) == sorted(map(id, program.commands))
    assert [c for c in moved.commands if _is_enable(c)] == [c for c in program.commands
                                                            if _is_enable(c)]


def test_end_to_end_estimate_matches_the_engine(lenet):
    """The report's end-to-end estimate and the engine run with the host agree (the estimate
    also counts the host seeing the last interrupt)."""
    from nvdla_sim.compiler.lower import run_lowered, lower
    from nvdla_sim.host.end_to_end import attach_host
    from nvdla_sim.report.tables import build_report
    program, ctx, prep = lenet
    res = run_lowered(lower(prep.plan, ctx), ctx)
    rep = build_report(prep, res)
    for name in ("rtl_testbench", "embedded_linux"):
        attach_host(rep, prep, res, name)
        host = load_host_profile(name)
        run = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, compute_values=False, host=name).run(program)
        engine_cycles = run.launches[-1].interrupt - run.first_write
        mhz = ctx.clock_mhz
        seen = (host.cycles("poll_response", mhz) + host.cycles("poll_period", mhz) / 2
                if host.interrupt == "poll" else host.cycles("interrupt_latency", mhz)
                + 2 * host.cycles("register_read", mhz))
        last = program.commands[max(i for i, c in enumerate(program.commands)
                                    if isinstance(c, SyncWait)):]
        clears = sum(isinstance(c, IntrNotify) for c in last)
        tail = seen + clears * max(FIFO_RATE, host.cycles("register_write", mhz)) \
            + host.cycles("driver_per_layer", mhz)
        estimate = rep.end_to_end.end_to_end_cycles - tail
        assert estimate == pytest.approx(engine_cycles, rel=0.03), name
        assert rep.end_to_end.hardware_cycles == res.total_cycles
        assert "end to end" in rep.end_to_end.line()
    assert rep.end_to_end.end_to_end_cycles > 2 * res.total_cycles   # Linux dominates LeNet


def test_shipped_host_profiles_have_a_source_for_every_time():
    assert {"rtl_testbench", "embedded_linux"} <= set(profile_names())
    for name in profile_names():
        p = load_host_profile(name)
        assert set(p.times) <= set(p.sources), (name, set(p.times) - set(p.sources))
        assert p.memory is not None
        load_memory_profile(p.memory)
    assert load_memory_profile("rtl_testbench").host == "rtl_testbench"
    assert load_memory_profile("dram").host is None


@pytest.mark.parametrize("data, says", [
    ({"interrupt": "poll", "poll_period_cycles": 36, "frobnicate": 1}, "unknown host profile field 'frobnicate'"),
    ({"interrupt": "poll", "poll_period_cycles": -1}, "poll_period_cycles: must be a number >= 0"),
    ({"interrupt": "poll", "poll_period_cycles": 36, "poll_period_ns": 36}, "poll_period: given both"),
    ({"interrupt": "msi"}, "interrupt: must be one of poll, irq"),
    ({"interrupt": "poll"}, "poll_period: a polling host needs"),
    ({"interrupt": "irq", "program_ahead": "yes"}, "program_ahead: must be true or false"),
    ({"interrupt": "irq", "memory": "sram9"}, "memory: unknown memory profile 'sram9'"),
    ({"interrupt": "irq", "sources": {"speed": "x"}}, "sources: 'speed' is not a profile field"),
    ({"interrupt": "irq", "register_write_ns": True}, "register_write_ns: must be a number"),
])
def test_bad_host_profiles_are_one_line_errors(tmp_path, data, says):
    import yaml
    path = tmp_path / "host.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(NvdlaSimError) as err:
        load_host_profile(path)
    msg = str(err.value)
    assert says in msg and "\n" not in msg and str(path) in msg


def test_host_times_convert_at_the_clock():
    p = load_host_profile({"profile": "embedded_linux", "register_write_ns": 500})
    assert p.cycles("register_write", 1000) == 500
    assert p.cycles("register_write", 500) == 250
    assert p.cycles("interrupt_latency", 1000) == load_host_profile("embedded_linux").cycles(
        "interrupt_latency", 1000)
    q = load_host_profile({"profile": "rtl_testbench", "poll_period_ns": 72})
    assert q.cycles("poll_period", 500) == 36
    with pytest.raises(NvdlaSimError, match="unknown host profile 'nope'"):
        load_host_profile("nope")


def test_dram_refresh_and_row_miss_are_parameters():
    for name, hit, miss, trefi, trfc, gbps in (("ddr4_3200", 36, 28, 7800, 350, 25.6),
                                              ("lpddr4_3200", 43, 36, 3904, 280, 12.8)):
        p = load_memory_profile(name)
        busy = trfc / trefi
        assert p.effective_read_latency() == pytest.approx(hit + 0.25 * miss + busy * trfc / 2)
        assert p.bytes_per_cycle_cap(1000) == pytest.approx(gbps * (1 - busy))
    # existing profiles are unchanged by the new fields
    assert load_memory_profile("ddr4_2400").effective_read_latency() == 52
    for bad, says in (({"row_miss_fraction": 1.5}, "row_miss_fraction: must be between 0 and 1"),
                      ({"refresh_cycles": 300}, "refresh_cycles: needs refresh_interval_cycles"),
                      ({"refresh_interval_cycles": 100, "refresh_cycles": 300},
                       "refresh_cycles: must be shorter"),
                      ({"row_miss_cycles": -3}, "row_miss_cycles: must be >= 0")):
        with pytest.raises(NvdlaSimError, match=says):
            load_memory_profile({"profile": "dram", **bad})


def test_refresh_and_row_misses_slow_a_layer(lenet):
    program, ctx, _ = lenet
    base = load_memory_profile("lpddr4_3200")
    plain = load_memory_profile({"profile": "lpddr4_3200", "row_miss_fraction": 0,
                                 "refresh_cycles": 0, "refresh_interval_cycles": 0})
    slow = Engine(ctx.hw, base, ctx.clock_mhz, compute_values=False).run(program).cycles
    fast = Engine(ctx.hw, plain, ctx.clock_mhz, compute_values=False).run(program).cycles
    assert slow > fast
