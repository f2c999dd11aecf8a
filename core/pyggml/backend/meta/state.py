"""Split states: how one meta tensor is spread over the devices of a meta device.

A state has an axis (AXIS_0..AXIS_3: every device holds a slice along that dimension; MIRRORED: every device holds
the whole tensor; PARTIAL: every device holds a whole-shaped partial sum) and, for split axes, segments. Along the
split axis the full tensor is laid out segment by segment; each segment is repeated `nr` times and every repeat
holds one chunk per device, in device order (segment, then repeat, then device). A device's local tensor is the
concatenation of its own chunks in the same order, so fused tensors (Q/K/V in one matrix, gate and up in one)
give every device whole pieces of each part. A device's extent on the axis is the sum over segments of ne * nr.

For PARTIAL, one segment may list which devices contribute (non-zero entries); no segments means all do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from math import floor

from pyggml.errors import ShapeError
from pyggml.tensor import MAX_DIMS, Tensor

MAX_DEVICES = 16
MAX_SEGMENTS = 16


class Axis(IntEnum):
    AXIS_0 = 0
    AXIS_1 = 1
    AXIS_2 = 2
    AXIS_3 = 3
    MIRRORED = 10
    """All values on every device."""
    PARTIAL = 11
    """Every device holds a partial sum of the values; the tensor is their sum."""


@dataclass(frozen=True, slots=True)
class Segment:
    ne: tuple[int, ...]
    """Elements along the split axis per device, in one repeat of this segment."""
    nr: int = 1
    """How many times the segment repeats."""

    @property
    def size(self) -> int:
        return sum(self.ne) * self.nr


@dataclass(frozen=True, slots=True)
class SplitState:
    axis: Axis
    segments: tuple[Segment, ...] = ()

    @property
    def is_split(self) -> bool:
        return self.axis <= Axis.AXIS_3

    @property
    def n_devices(self) -> int:
        return len(self.segments[0].ne) if self.segments else 0

    def extent(self, j: int) -> int:
        """Device j's elements along the split axis (for PARTIAL: non-zero when j contributes)."""
        return sum(s.ne[j] * s.nr for s in self.segments)

    def extents(self) -> tuple[int, ...]:
        return tuple(self.extent(j) for j in range(self.n_devices))

    @property
    def total(self) -> int:
        return sum(s.size for s in self.segments)

    def contributes(self, j: int) -> bool:
        """For PARTIAL: whether device j holds a (possibly) non-zero part."""
        return not self.segments or self.extent(j) != 0

    def with_axis(self, axis: int) -> SplitState:
        return SplitState(Axis(axis), self.segments)

    def scaled(self, num: int, den: int, what: str) -> SplitState:
        """Every chunk multiplied by num/den (a new unit along the axis); each must stay a whole number."""
        out = []
        for s in self.segments:
            if any(n * num % den for n in s.ne):
                raise ShapeError(f"{what}: per-device chunks {list(s.ne)} of {describe_state(self)} do not map to "
                                 f"whole units ({num}/{den} per element)")
            out.append(Segment(tuple(n * num // den for n in s.ne), s.nr))
        return SplitState(self.axis, tuple(out))

    def repeated(self, m: int, what: str) -> SplitState:
        """The segment pattern repeated m times (a dimension merged with m outer blocks)."""
        if m == 1:
            return self
        if len(self.segments) == 1:
            s = self.segments[0]
            return SplitState(self.axis, (Segment(s.ne, s.nr * m),))
        if len(self.segments) * m > MAX_SEGMENTS:
            raise ShapeError(f"{what}: repeating {len(self.segments)} segments {m} times exceeds {MAX_SEGMENTS}")
        return SplitState(self.axis, self.segments * m)


MIRRORED = SplitState(Axis.MIRRORED)
PARTIAL = SplitState(Axis.PARTIAL)


def split(axis: int, ne: Sequence[int], nr: int = 1) -> SplitState:
    """A one-segment split: device j holds ne[j] elements along `axis` (repeated nr times)."""
    return SplitState(Axis(axis), (Segment(tuple(ne), nr),))


def segmented(axis: int, segments: Sequence[tuple[Sequence[int], int]]) -> SplitState:
    """A split of several segments, each (per-device elements, repeat count)."""
    return SplitState(Axis(axis), tuple(Segment(tuple(ne), nr) for ne, nr in segments))


def partial(contributors: Sequence[int] | None = None) -> SplitState:
    """PARTIAL; `contributors` marks with non-zero entries the devices that hold a part (default: all)."""
    return PARTIAL if contributors is None else SplitState(Axis.PARTIAL, (Segment(tuple(contributors)),))


def describe_state(s: SplitState) -> str:
    if not s.is_split:
        return s.axis.name
    segs = ", ".join(f"{list(g.ne)}x{g.nr}" for g in s.segments)
    return f"{s.axis.name}[{segs}]"


def same_extents(a: SplitState, b: SplitState) -> bool:
    return a.axis == b.axis and a.extents() == b.extents()


# ---- shares -----------------------------------------------------------------------------------------------


def split_shares(total: int, n_devices: int, ratios: Sequence[float] | None = None, granularity: int = 1,
                 rotation: int = 0, what: str = "split") -> tuple[int, ...]:
    """Elements per device for an extent of `total`: whole multiples of `granularity` in proportion to `ratios`
    (llama.cpp's --tensor-split; default: equal). Units left over after rounding down go to the devices with the
    largest remainders; ties are broken starting at device `rotation`, so a per-layer rotation spreads the extra
    units over the devices. A device with ratio 0 gets nothing."""
    if not 1 <= n_devices <= MAX_DEVICES:
        raise ShapeError(f"{what}: {n_devices} devices; a meta device has 1 to {MAX_DEVICES}")
    if granularity <= 0 or total % granularity:
        raise ShapeError(f"{what}: extent {total} is not a whole number of units of {granularity} elements")
    r = [1.0] * n_devices if ratios is None else [float(x) for x in ratios]
    if len(r) != n_devices or any(x < 0 for x in r) or sum(r) <= 0:
        raise ShapeError(f"{what}: tensor split {list(r)} does not fit {n_devices} devices (one non-negative "
                         f"proportion per device, not all zero)")
    units = total // granularity
    fr = [Fraction(x) for x in r]
    whole = sum(fr)
    exact = [units * x / whole for x in fr]
    base = [floor(e) for e in exact]
    order = sorted((j for j in range(n_devices) if fr[j] > 0),
                   key=lambda j: (-(exact[j] - base[j]), (j - rotation) % n_devices))
    for j in order[: units - sum(base)]:
        base[j] += 1
    return tuple(b * granularity for b in base)


# ---- validation of states given by the user -----------------------------------------------------------------


def check_state(t: Tensor, s: SplitState, n_devices: int, source: str) -> SplitState:
    """Validate a state chosen for a stored tensor (weights, caches): device count, segment count, extents that
    sum to the tensor's dimension, and chunks on axis 0 in whole quantisation blocks."""
    name = f"tensor '{t.name}' {t.type} ne={list(t.ne)}"
    if not isinstance(s, SplitState):
        raise ShapeError(f"{source} returned {s!r} for {name}, not a SplitState")
    if s.axis == Axis.MIRRORED:
        return s
    if len(s.segments) > MAX_SEGMENTS:
        raise ShapeError(f"{source}: {name} has {len(s.segments)} segments; at most {MAX_SEGMENTS}")
    if any(len(g.ne) != n_devices for g in s.segments):
        raise ShapeError(f"{source}: state {describe_state(s)} of {name} does not have one entry per device "
                         f"({n_devices} devices)")
    if any(n < 0 for g in s.segments for n in g.ne) or any(g.nr <= 0 for g in s.segments):
        raise ShapeError(f"{source}: state {describe_state(s)} of {name} has negative shares or repeats")
    if s.axis == Axis.PARTIAL:
        if len(s.segments) > 1 or any(g.nr != 1 for g in s.segments):
            raise ShapeError(f"{source}: a PARTIAL state takes at most one segment without repeats ({name})")
        return s
    if s.axis >= MAX_DIMS:
        raise ShapeError(f"{source}: axis {s.axis} of {name} is not a dimension")
    if not s.segments:
        raise ShapeError(f"{source}: split state of {name} has no segments")
    if s.total != t.ne[s.axis]:
        raise ShapeError(f"{source}: state {describe_state(s)} of {name} covers {s.total} elements of "
                         f"dimension {int(s.axis)}, which has {t.ne[s.axis]}")
    blck = t.type.traits.blck_size
    if s.axis == Axis.AXIS_0 and any(n % blck for g in s.segments for n in g.ne):
        raise ShapeError(f"{source}: state {describe_state(s)} of {name} breaks the granularity: {t.type} "
                         f"stores rows in blocks of {blck} elements, so every chunk on axis 0 must be a multiple "
                         f"of {blck}")
    return s
