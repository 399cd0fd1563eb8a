"""What each unit did when: busy and stall spans, for utilization figures and timelines.

A span is (unit, kind, start, end, label).  The timing processes add spans one at a time (a
Python list: appending is all a token pays); a step the step cache recorded is frozen into a
`SpanBlock` (columns: float64 starts and ends, small integer codes for (unit, kind) and label)
and a replayed step appends its entry's block with a shift, in O(1) instead of one tuple per
span (issue 20: ResNet-50 on nv_small makes 780 k spans).  `ActivityLog.spans` materialises the
tuple list on demand (timelines, VP layer reports) in the order the spans were made.

Totals merge overlapping spans of one (unit, kind): sorted by start, the union's length summed
group by group from the left, the same float operations as the straightforward loop (sort the
(start, end) pairs, extend or close the current group), so every reported figure is
bit-identical to it (tests/test_speed_spans.py).  A shifted span starts at `shift + start`,
the float sum a replay always made.  The merge is one C pass over the log's segments as they
are (kernels/span_merge.pyx: a unit's spans come in order of start, so no sort, no copy and no
concatenation; a key whose starts go back is sorted in a second pass): 0.040 -> 0.005 CPU s for
the totals of ResNet-50's 816 k spans on nv_large_8x8.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..kernels.span_columns import span_columns
from ..kernels.span_merge import merge_spans, merged_length

Span = tuple[str, str, float, float, str]


@dataclass
class SpanBlock:
    """Spans as columns: span i is (keys[key_idx[i]] unit and kind, starts[i], ends[i],
    labels[label_idx[i]])."""
    keys: list[tuple[str, str]]
    key_idx: np.ndarray         # intp per span
    starts: np.ndarray          # float64 per span
    ends: np.ndarray
    labels: list[str]
    label_idx: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def from_spans(cls, spans: Sequence[Span]) -> "SpanBlock":
        # units, kinds, labels numbered in order of first appearance (kernels/span_columns.pyx)
        units, unit_idx, kinds, kind_idx, labels, label_idx, starts, ends = \
            span_columns(spans if type(spans) is list else list(spans))
        # (every unit with every kind: a key no span has is harmless, and no pair is built)
        keys = [(u, k) for u in units for k in kinds]
        return cls(keys, unit_idx * len(kinds) + kind_idx, starts, ends, labels, label_idx)

    def relative(self, t0: float, labels: list[str]) -> "SpanBlock":
        """The same spans `t0` earlier (`start - t0` per span), with relabelled labels."""
        return SpanBlock(self.keys, self.key_idx, self.starts - t0, self.ends - t0, labels,
                         self.label_idx)


@dataclass
class _Shifted:
    """A block placed at `shift` (None: its times are absolute) with its labels renamed."""
    block: SpanBlock
    shift: float | None
    labels: list[str]

    def __len__(self) -> int:
        return len(self.block)

    def columns(self) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
        b = self.block
        if self.shift is None:
            return b.keys, b.key_idx, b.starts, b.ends
        return b.keys, b.key_idx, self.shift + b.starts, self.shift + b.ends

    def tuples(self) -> list[Span]:
        keys, key_idx, starts, ends = self.columns()
        labels = self.labels
        return [(*keys[k], s, e, labels[lab]) for k, s, e, lab in
                zip(key_idx.tolist(), starts.tolist(), ends.tolist(),
                    self.block.label_idx.tolist())]


class ActivityLog:
    """The run's spans: a sequence of segments, each a list of tuples (spans added one by one)
    or a shifted block; new spans go to the last list."""

    def __init__(self, spans: Iterable[Span] | None = None):
        self._tail: list[Span] = list(spans) if spans is not None else []
        self._segments: list = [self._tail]
        self._closed = 0            # spans in the segments before the tail

    def add(self, unit: str, kind: str, start: float, end: float, label: str = "") -> None:
        if end > start:
            self._tail.append((unit, kind, start, end, label))

    def __len__(self) -> int:
        return self._closed + len(self._tail)

    def mark(self) -> int:
        """A position in the log (spans so far): for `merged(since=...)`, `freeze_since`."""
        return self._closed + len(self._tail)

    @property
    def spans(self) -> list[Span]:
        """Every span in order, as tuples (the log keeps that list from then on)."""
        if len(self._segments) > 1:
            out = list(self.iter_spans())
            self._tail, self._segments, self._closed = out, [out], 0
        return self._tail

    def iter_spans(self) -> Iterator[Span]:
        """Every span in order, as tuples, leaving the log's blocks as they are."""
        for seg in self._segments:
            yield from (seg if type(seg) is list else seg.tuples())

    # -- blocks --------------------------------------------------------------------------------
    def append_block(self, block: SpanBlock, shift: float | None = None,
                     labels: list[str] | None = None) -> None:
        """Append a block's spans, `shift + start` and `shift + end` each, labels renamed."""
        if not len(block):
            return
        if not self._tail:
            self._segments.pop()
        else:
            self._closed += len(self._tail)
        self._segments.append(_Shifted(block, shift, block.labels if labels is None else labels))
        self._closed += len(block)
        self._tail = []
        self._segments.append(self._tail)

    def freeze_since(self, mark: int) -> SpanBlock:
        """The spans added one by one since `mark` as a block (absolute times); the log keeps
        them as that block from now on (the same spans, in the same order)."""
        start = mark - self._closed
        if start < 0:
            raise ValueError("freeze_since: blocks were appended since the mark")
        block = SpanBlock.from_spans(self._tail[start:])
        if len(block):
            del self._tail[start:]
            self.append_block(block)
        return block

    def _since(self, mark: int) -> list:
        """The segments (a list part cut at `mark`) holding the spans from `mark` on."""
        out, pos = [], len(self)
        for seg in reversed(self._segments):
            if pos <= mark:
                break
            n = len(seg)
            pos -= n
            if pos < mark:      # (a block frozen after a mark inside it: as tuples)
                seg = (seg if type(seg) is list else seg.tuples())[mark - pos:]
            out.append(seg)
        out.reverse()
        return out

    # -- merged totals -------------------------------------------------------------------------
    def totals(self) -> dict[str, dict[str, float]]:
        """Per unit, cycles spent per kind (busy, stall, ...); overlapping spans are merged."""
        return self.merged()

    def merged(self, kind: str | None = None, units: Iterable[str] | None = None,
               since: int = 0, clip: tuple[float, float] | None = None
               ) -> dict[str, dict[str, float]]:
        """Per unit and kind, the merged cycles of the spans from `since` on, of one `kind` and
        `units` when given, each cut to `clip` = (start, end) when given (empty cuts left
        out; without `clip` every span counts, as the straightforward merge counts them).
        Units and kinds in the order their first counted span was made."""
        return merge_spans(self._merge_segments(since), kind,
                           None if units is None else set(units), clip)

    def _merge_segments(self, mark: int) -> list[tuple]:
        """The segments holding the spans from `mark` on, for `merge_spans`: (first, spans) for
        a list, (first, keys, key_idx, starts, ends, shift) for a block, `first` the position
        of the first span wanted in it."""
        out, pos = [], len(self)
        for seg in reversed(self._segments):
            if pos <= mark:
                break
            pos -= len(seg)
            first = mark - pos if pos < mark else 0
            if type(seg) is list:
                out.append((first, seg))
            else:
                b = seg.block
                out.append((first, b.keys, b.key_idx, b.starts, b.ends, seg.shift))
        out.reverse()
        return out

    def columns(self, since: int = 0) -> "Columns":
        """The spans from `since` on as columns (times shifted, no labels)."""
        keys: dict[tuple[str, str], int] = {}
        key_parts, start_parts, end_parts = [], [], []
        for seg in self._since(since):
            if type(seg) is list:
                if not seg:
                    continue
                seg = _Shifted(SpanBlock.from_spans(seg), None, [])
            seg_keys, key_idx, starts, ends = seg.columns()
            remap = np.array([keys.setdefault(k, len(keys)) for k in seg_keys], np.intp)
            key_parts.append(remap[key_idx])
            start_parts.append(starts)
            end_parts.append(ends)
        if not keys:
            return Columns([], np.empty(0, np.intp), np.empty(0), np.empty(0))
        return Columns(list(keys), np.concatenate(key_parts), np.concatenate(start_parts),
                       np.concatenate(end_parts))


@dataclass
class Columns:
    """Spans as columns in the order made: span i is keys[key_idx[i]] (unit, kind), starts[i],
    ends[i]."""
    keys: list[tuple[str, str]]
    key_idx: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def of(self, kind: str | None = None, units: Iterable[str] | None = None) -> np.ndarray:
        """Positions of the spans of one kind and of `units` (None: any), in order."""
        unit_set = None if units is None else set(units)
        wanted = np.array([(kind is None or k == kind) and (unit_set is None or u in unit_set)
                           for u, k in self.keys] + [False], bool)
        return np.flatnonzero(wanted[self.key_idx])


def merged_columns(cols: Columns, kind: str | None = None, units: Iterable[str] | None = None,
                   clip: tuple[float, float] | None = None) -> dict[str, dict[str, float]]:
    """`ActivityLog.merged` of the spans in `cols`."""
    return merge_spans([(0, cols.keys, cols.key_idx, cols.starts, cols.ends, None)], kind,
                       None if units is None else set(units), clip)
