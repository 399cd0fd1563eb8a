"""The scenario report's quantisation lines: the network output's SQNR against float32 (values
mode) and, for the sub-8-bit what-if (docs/precision.md), what was quantised to how many bits
and where each rounding happened."""
from __future__ import annotations


def attach_quantization(rep, prep, values: dict | None) -> None:
    """Fill `rep.output_sqnr_db` and, with weight_bits / activation_bits below 8,
    `rep.quantization`."""
    from ..scenario.runner import output_sqnr_db
    rep.output_sqnr_db = output_sqnr_db(prep, values)
    q = prep.scenario.quantization
    if q.weight_bits < 8 or q.activation_bits < 8:
        rep.quantization = {"weight_bits": q.weight_bits, "activation_bits": q.activation_bits,
                            "rounding": q.rounding, "seed": q.seed}


def quantization_lines(rep) -> list[str]:
    lines = []
    if rep.output_sqnr_db is not None:
        lines.append(f"network output SQNR: {rep.output_sqnr_db:.1f} dB against float32")
    q = rep.quantization
    if q:
        where = ("the weights and the network input; the SDP output converters round activations "
                 "to nearest" if q["rounding"] != "nearest" else "the weights, the input and the "
                 "SDP output converters")
        lines.append(f"sub-8-bit what-if: {q['weight_bits']}-bit weights, {q['activation_bits']}-bit "
                     f"activations in the INT8 container; {q['rounding']} rounding in {where} "
                     "(docs/precision.md)")
    return lines
