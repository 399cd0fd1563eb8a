"""What each unit did when: busy and stall spans, for utilization figures and timelines."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class ActivityLog:
    spans: list[tuple[str, str, float, float, str]] = field(default_factory=list)  # unit, kind, start, end, label

    def add(self, unit: str, kind: str, start: float, end: float, label: str = "") -> None:
        if end > start:
            self.spans.append((unit, kind, start, end, label))

    def totals(self) -> dict[str, dict[str, float]]:
        """Per unit, cycles spent per kind (busy, stall, ...); overlapping spans are merged."""
        by_unit: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for unit, kind, start, end, _ in self.spans:
            by_unit[(unit, kind)].append((start, end))
        out: dict[str, dict[str, float]] = defaultdict(dict)
        for (unit, kind), intervals in by_unit.items():
            intervals.sort()
            total, cur_s, cur_e = 0.0, None, None
            for s, e in intervals:
                if cur_e is None or s > cur_e:
                    if cur_e is not None:
                        total += cur_e - cur_s
                    cur_s, cur_e = s, e
                else:
                    cur_e = max(cur_e, e)
            if cur_e is not None:
                total += cur_e - cur_s
            out[unit][kind] = total
        return dict(out)
