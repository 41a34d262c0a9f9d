"""The held-out split of a batch: prompts chosen by their sample id, never trained on.

A capture batch declares a fraction (``capture --held-out 0.05``); a prompt is held out when
the first 8 bytes of sha256(its sample id), read as a fraction of 2^64, fall below it. The
choice depends on nothing but the id, so it is the same on every run, resume and machine,
and a prompt keeps its side when the prompt file grows. ``export`` leaves held-out rows out
by default; ``accept --from-batch`` replays exactly them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SCALE = float(1 << 64)


def held_out_point(sample_id: str) -> float:
    """Where ``sample_id`` falls in [0, 1): the first 8 bytes of its sha256."""
    digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def is_held_out(sample_id: str, fraction: float) -> bool:
    """True when the prompt ``sample_id`` is in a split of ``fraction``."""
    return fraction > 0 and held_out_point(sample_id) < fraction


_NUMBERED_SUFFIX = re.compile(r"#(?:turn|r)\d+$")


def prompt_id(row_sample_id: str, presets: Iterable[str] = ()) -> str:
    """The prompt's id of a row's sample id: rows of a named sampling preset, a repeat or a
    turn are ``<prompt id>#<preset>#r<k>#turn<k>``, and the split is decided by the prompt.
    Only those suffixes are removed (a prompt's own id may hold ``#``)."""
    names = [f"#{name}" for name in presets if name]
    current = row_sample_id
    while True:
        numbered = _NUMBERED_SUFFIX.search(current)
        if numbered is not None:
            current = current[: numbered.start()]
            continue
        named = next((n for n in names if current.endswith(n) and len(current) > len(n)), None)
        if named is None:
            return current
        current = current[: -len(named)]


def held_out_ids(sample_ids: Iterable[str], fraction: float) -> frozenset[str]:
    """The ids of ``sample_ids`` that the split holds."""
    return frozenset(i for i in sample_ids if is_held_out(i, fraction))


@dataclass(frozen=True)
class HeldOutSplit:
    """A batch's split: its fraction and the names of its sampling presets (row ids carry
    them)."""

    fraction: float
    presets: tuple[str, ...] = ()

    def holds(self, row_sample_id: str) -> bool:
        """True when the row's prompt is held out."""
        return is_held_out(prompt_id(row_sample_id, self.presets), self.fraction)


def check_fraction(fraction: float) -> float:
    """``fraction`` when it is in (0, 1); ValueError naming the flag otherwise."""
    if not 0 < fraction < 1:
        raise ValueError(f"--held-out must be a fraction between 0 and 1 (e.g. 0.05), "
                         f"got {fraction:g}")
    return fraction


__all__ = ["HeldOutSplit", "check_fraction", "held_out_ids", "held_out_point", "is_held_out",
           "prompt_id"]
