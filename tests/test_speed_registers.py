"""The per-register shortcuts of issue 20 (compiler writes, CSB writes) against plain versions
kept here: `ProgramBuilder.reg`'s cached targets and field codes give the word, address and
errors of a plain resolve-and-encode; compiled networks' programs equal a builder that encodes
every field the plain way; `RegisterFile.write` with its address cache leaves the storage of a
plain decode-and-mask; the cached definition figures equal their sums."""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nvdla_sim import formats
from nvdla_sim.compiler import lower as lower_mod
from nvdla_sim.compiler.emit import ProgramBuilder
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import MemLoad, RegWrite
from nvdla_sim.regs import RegisterFile, register_map
from nvdla_sim.regs.regmap import UNIT_ALIASES
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
V2 = register_map(2)


def _plain_mask(f) -> int:
    return ((1 << (f.hi - f.lo + 1)) - 1) << f.lo


def _plain_target(regmap, unit: str, register: str):
    """(unit name, register) as the map's tables hold them: NVDLA_ prefix and _0 suffix optional."""
    u_name = unit.upper().removeprefix("NVDLA_")
    u_name = UNIT_ALIASES.get(u_name, u_name)
    if u_name not in regmap.units:
        raise NvdlaSimError(f"unknown unit '{unit}'")
    regs = regmap.units[u_name].regs
    name = register.upper()
    if name not in regs and name.endswith("_0"):
        name = name[:-2]
    if name not in regs:
        raise NvdlaSimError(f"unknown register '{register}' in unit {u_name}")
    return u_name, regs[name]


def _plain_word(regmap, unit: str, register: str, value=None, **fields) -> tuple[int, int, str]:
    """(CSB address, word, UNIT.REG) of a write, every field checked and encoded in turn."""
    u_name, r = _plain_target(regmap, unit, register)
    word = 0 if value is None else int(value) & 0xFFFFFFFF
    for name, v in fields.items():
        if name not in r.fields:
            raise NvdlaSimError(f"unknown field {name}")
        f = r.fields[name]
        if isinstance(v, str):
            if not f.enum or v not in f.enum:
                raise NvdlaSimError(f"unknown value name {v}")
            v = f.enum[v]
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if not isinstance(v, (int, np.integer)):
            raise NvdlaSimError(f"{v!r} is not an integer")
        v, width = int(v), f.hi - f.lo + 1
        if not -(1 << (width - 1)) <= v < (1 << width):
            raise NvdlaSimError(f"{v} does not fit")
        if f.access == "r":
            raise NvdlaSimError("read-only")
        word = (word & ~_plain_mask(f)) | ((v & ((1 << width) - 1)) << f.lo)
    return regmap.base(u_name) + r.offset, word, f"{u_name}.{r.name}"


class _Forgetful(dict):
    """A table that keeps nothing: every SDP operand is packed anew."""

    def __setitem__(self, key, value):
        pass


class PlainBuilder(ProgramBuilder):
    """A ProgramBuilder whose register writes take the plain path above and that packs every
    SDP operand anew."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.operand_images = _Forgetful()

    def reg(self, unit, register, value=None, **fields):
        addr, word, name = _plain_word(self.regmap, unit, register, value, **fields)
        self.commands.append(RegWrite(addr, word, name))
        return word


# -- one write at a time ------------------------------------------------------------------------
_WRITABLE = [(u.name, r.name) for u in V2.units.values() for r in u.regs.values() if r.fields]


@st.composite
def _writes(draw):
    unit, reg = draw(st.sampled_from(_WRITABLE))
    r = V2.units[unit].regs[reg]
    spelled_unit = draw(st.sampled_from([unit, f"NVDLA_{unit}", unit.lower()]))
    spelled_reg = draw(st.sampled_from([reg, f"{reg}_0"]))
    names = draw(st.lists(st.sampled_from(sorted(r.fields) + ["NO_SUCH_FIELD"]), max_size=4,
                          unique=True))
    fields = {}
    for name in names:
        f = r.fields.get(name)
        width = 1 if f is None else f.hi - f.lo + 1
        choices = [st.integers(-(1 << width), 1 << (width + 1)),
                   st.booleans(), st.integers(-3, 3).map(np.int64), st.just("NO_SUCH_NAME"),
                   st.just(1.5)]
        if f is not None and f.enum:
            choices.append(st.sampled_from(sorted(f.enum)))
        fields[name] = draw(st.one_of(*choices))
    value = draw(st.one_of(st.none(), st.integers(-(1 << 33), 1 << 33)))
    return spelled_unit, spelled_reg, value, fields


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_writes())
def test_reg_writes_the_plain_word(write):
    unit, reg, value, fields = write
    b = ProgramBuilder(load_hardware("nv_small"))
    try:
        expected = _plain_word(b.regmap, unit, reg, value, **fields)
    except NvdlaSimError:
        with pytest.raises(NvdlaSimError):
            b.reg(unit, reg, value, **fields)
        assert not b.commands
        return
    assert b.reg(unit, reg, value, **fields) == expected[1]
    assert b.commands == [RegWrite(*expected)]


def test_unknown_names_are_refused_by_name():
    b = ProgramBuilder(load_hardware("nv_small"))
    for unit, reg, fields, says in (("NO_UNIT", "D_MISC_CFG", {}, "unknown unit 'NO_UNIT'"),
                                    ("CDMA", "NO_REG", {}, "unknown register 'NO_REG'"),
                                    ("CDMA", "D_MISC_CFG", {"NOPE": 1}, "unknown field 'NOPE'"),
                                    ("CDMA", "D_MISC_CFG", {"CONV_MODE": "NOPE"}, "'NOPE'"),
                                    ("CDMA", "D_MISC_CFG", {"CONV_MODE": 2}, "1-bit field")):
        for _ in range(2):              # the second time from the caches
            with pytest.raises(NvdlaSimError, match=says):
                b.reg(unit, reg, **fields)
    assert not b.commands


# -- compiled networks ----------------------------------------------------------------------------
def _resnet_doc() -> dict:
    import yaml
    doc = yaml.safe_load((ROOT / "scenarios" / "resnet50_nv_large.yaml").read_text())
    doc.pop("outputs", None)
    return doc


NETWORKS = {
    "resnet50_nv_large": lambda: parse_scenario({**_resnet_doc(), "mode": "timing-only"},
                                                ROOT / "scenarios"),
    # ResNet-50 on a 64-MAC nv_large: height-sliced layers (benchmarks/array_variants.py)
    "resnet50_nv_large_8x8": lambda: parse_scenario(
        {**_resnet_doc(), "mode": "timing-only",
         "hardware": {"preset": "nv_large", "atomic_c": 8, "atomic_k": 8,
                      "memory_atomic_bytes": 8, "cbuf": {"bank_width_bytes": 8}}},
        ROOT / "scenarios"),
    "resnet50_nv_small": lambda: parse_scenario(
        {**_resnet_doc(), "mode": "timing-only", "hardware": "nv_small"}, ROOT / "scenarios"),
    "lenet5_nv_full_int16": lambda: load_scenario(ROOT / "scenarios" / "lenet5_nv_full_int16.yaml"),
    "lenet5_nv_full_fp16": lambda: load_scenario(ROOT / "scenarios" / "lenet5_nv_full_fp16.yaml"),
    # values: conv1 of ResNet-50 on nv_small, split by height (its parts share bias operands)
    "resnet50_conv1_nv_small_values": lambda: parse_scenario(
        {"hardware": "nv_small", "mode": "values+timing", "input": {"seed": 1},
         "weights": {"seed": 1},
         "network": {"name": "conv1", "input": [3, 224, 224], "layers": [
             {"name": "conv1", "type": "conv", "out_channels": 64, "kernel": 7, "stride": 2,
              "pad": 3, "relu": True}]}}, None),
}


@pytest.mark.parametrize("name", list(NETWORKS))
def test_compiled_program_equals_the_plain_builders(name, monkeypatch):
    packed = []
    real_pack = formats.pack_per_channel
    monkeypatch.setattr(formats, "pack_per_channel",
                        lambda *a, **k: packed.append(1) or real_pack(*a, **k))
    prep = prepare(NETWORKS[name]())
    fast = lower_mod.lower(prep.plan, context(prep)).program.commands
    fast_packs = len(packed)
    monkeypatch.setattr(lower_mod, "ProgramBuilder", PlainBuilder)
    prep = prepare(NETWORKS[name]())
    plain = lower_mod.lower(prep.plan, context(prep)).program.commands
    plain_packs = len(packed) - fast_packs
    writes = [c for c in plain if isinstance(c, RegWrite)]
    assert len(writes) > 150
    assert len(fast) == len(plain)
    for i, (a, b) in enumerate(zip(fast, plain)):
        if isinstance(b, MemLoad):  # (memory images: numpy arrays compare element-wise)
            assert (a.mem, a.addr, a.source, a.where) == (b.mem, b.addr, b.source, b.where), i
            assert np.array_equal(a.data, b.data), i
        else:
            assert a == b, (i, a, b)
    if name.endswith("_values"):
        assert sum(isinstance(c, MemLoad) for c in plain) > 3
        parts = sum(isinstance(c, RegWrite) and c.name == "CDMA.D_OP_ENABLE" for c in plain)
        assert parts > 1, "conv1 was not split"
        assert fast_packs < plain_packs, "the parts' bias bytes were packed per part"


# -- CSB writes -----------------------------------------------------------------------------------
def _plain_store(regmap, state: dict, addr: int, value: int) -> None:
    """A CSB write as the register models define it, on {(unit, group or 's', offset): word}
    and {unit: producer}: decoded from the base table, read-only bits kept, dual registers
    in the producer's group."""
    base = addr & ~0xFFF
    unit = next(u for u in regmap.units.values() if regmap.base(u.name) == base)
    reg = next((r for r in unit.regs.values() if r.offset == addr - base), None)
    if reg is None:
        return
    if reg.name == "S_POINTER":
        state["producer"][unit.name] = value & 1
        return
    writable = sum(_plain_mask(f) for f in reg.fields.values() if f.access != "r")
    reset = sum((f.reset << f.lo) & _plain_mask(f) for f in reg.fields.values())
    op = unit.regs.get("D_OP_ENABLE")
    where = state["producer"].get(unit.name, 0) if op is not None and reg.offset >= op.offset \
        else "s"
    key = (unit.name, where, reg.offset)
    state["words"][key] = (state["words"].get(key, reset) & ~writable) | (value & writable)


@pytest.mark.parametrize("version", [1, 2])
def test_csb_writes_store_the_plain_words(version):
    regmap = register_map(version)
    rf = RegisterFile(regmap)
    rng = random.Random(20 + version)
    addrs = [regmap.base(u.name) + r.offset for u in regmap.units.values()
             if regmap.base(u.name) is not None for r in u.regs.values()]
    addrs += [regmap.base("SDP") + 0xFFC]           # an offset no register has
    state = {"producer": {}, "words": {}}
    for _ in range(20000):
        addr, value = rng.choice(addrs), rng.getrandbits(32)
        rf.write(addr, value)
        _plain_store(regmap, state, addr, value)
    for (unit, where, offset), word in state["words"].items():
        u = rf[unit]
        store = u.single if where == "s" else u.dual[where]
        reg = u.definition.by_offset[offset]
        reset = sum((f.reset << f.lo) & _plain_mask(f) for f in reg.fields.values())
        assert store.get(offset, reset) == word, (unit, where, hex(offset))
    for unit, producer in state["producer"].items():
        assert rf[unit].producer == producer


def test_cached_definition_figures_equal_their_sums():
    for version in (1, 2):
        for u in register_map(version).units.values():
            op = u.regs.get("D_OP_ENABLE")
            assert u.op_enable_offset == (op.offset if op is not None else None)
            for r in u.regs.values():
                assert r.writable_mask == sum(_plain_mask(f) for f in r.fields.values()
                                              if f.access != "r")
                assert r.reset_value == sum((f.reset << f.lo) & _plain_mask(f)
                                            for f in r.fields.values())
                for f in r.fields.values():
                    assert f.mask == _plain_mask(f)
