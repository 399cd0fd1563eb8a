"""Report figures keep their digits for small networks (issue 13) and their text for large ones."""
from __future__ import annotations

from nvdla_sim.report.numbers import BYTES, MACS, fixed_or_significant, scaled


def test_macs_take_the_largest_unit_reached():
    assert scaled(3.858e9, MACS) == "3.858 GMAC"            # ResNet-50: as before
    assert scaled(2_293_600, MACS) == "2.294 MMAC"          # LeNet-5: was 0.002 GMAC
    assert scaled(999.0, MACS) == "999.000 MAC"
    assert scaled(1000.0, MACS) == "1.000 kMAC"
    assert scaled(0.0, MACS) == "0.000 MAC"


def test_bytes_and_significant_digits():
    assert scaled(48.8 * 2 ** 20, BYTES, 1) == "48.8 MiB"
    assert scaled(3 * 1024 + 512, BYTES, 1) == "3.5 KiB"
    assert fixed_or_significant(5.7789) == "5.779"           # from 1 up: three places
    assert fixed_or_significant(0.001097) == "0.001097"      # below: four significant digits
    assert fixed_or_significant(0.0) == "0.000"
