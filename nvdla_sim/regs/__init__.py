"""NVDLA register map (data) and register files with register-group (ping-pong) semantics."""
from .regmap import RegisterMap, RegisterDef, FieldDef, register_map
from .regfile import RegisterFile, UnitRegisters, GroupView

__all__ = ["RegisterMap", "RegisterDef", "FieldDef", "register_map", "RegisterFile",
           "UnitRegisters", "GroupView"]
