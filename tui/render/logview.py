"""Server log lines as the log pane shows them (pure: no widgets, no I/O).

An 8-rank SGLang server prints most start-up lines once per tensor-parallel rank, a second
apart at most: ``collapse_ranks`` folds such runs into one line naming the ranks
(``[… TP0-7] Load weight begin. (×8 ranks)``). ``strip_timestamp`` drops the date and time
from SGLang's ``[date time TPn]`` prefix (the pane's timestamps toggle); ``wrap_line`` cuts a
long line into pane-wide pieces; ``find_line`` finds the next or previous line matching a
pattern (search with n/N, errors with e/E).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

RANK_TAG = re.compile(r"^\[(?P<stamp>[^\]]*?)\s*TP(?P<rank>\d+)\]")
STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s*")
WRAP_INDENT = "  "


class Matcher(Protocol):
    """Anything with ``search(line)`` (a compiled regex)."""

    def search(self, line: str, /) -> object: ...


@dataclass
class RankGroup:
    """A run of lines that differ only in their rank (and time stamp)."""

    key: str
    first: str
    ranks: list[int]

    def text(self) -> str:
        """The first line, its rank tag naming every rank of the run."""
        if len(self.ranks) < 2:
            return self.first
        tag = f"TP{rank_ranges(self.ranks)}]"
        match = RANK_TAG.match(self.first)
        assert match is not None
        head = self.first[: match.start("rank") - 2]
        return f"{head}{tag}{self.first[match.end():]}  (×{len(self.ranks)} ranks)"


def rank_key(line: str) -> tuple[str, int] | None:
    """(the line without its time stamp and rank, the rank), or None for an untagged line."""
    match = RANK_TAG.match(line)
    if match is None:
        return None
    return line[match.end():], int(match.group("rank"))


def collapse_ranks(lines: Iterable[str], group: RankGroup | None = None) -> Iterator[RankGroup]:
    """Consecutive lines that differ only in rank, as one group each (``group``: one still
    open from earlier lines, continued if the first lines match it)."""
    for line in lines:
        keyed = rank_key(line)
        if keyed is not None and group is not None and keyed[0] == group.key and (
            keyed[1] not in group.ranks
        ):
            group.ranks.append(keyed[1])
            continue
        if group is not None:
            yield group
        group = RankGroup(keyed[0], line, [keyed[1]]) if keyed else RankGroup("", line, [])
        if keyed is None:
            yield group
            group = None
    if group is not None:
        yield group


def rank_ranges(ranks: Sequence[int]) -> str:
    """``0-7`` or ``0-3,5``."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    start = prev = ordered[0]
    for rank in [*ordered[1:], None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ",".join(parts)


def strip_timestamp(line: str) -> str:
    """``[2026-01-02 03:04:05 TP0] x`` -> ``[TP0] x`` (other lines unchanged)."""
    return STAMP.sub("[", line, count=1)


def wrap_line(line: str, width: int) -> list[str]:
    """``line`` cut into pieces of at most ``width`` cells, continuations indented."""
    if width < 8 or len(line) <= width:
        return [line]
    pieces = [line[:width]]
    rest = line[width:]
    step = width - len(WRAP_INDENT)
    while rest:
        pieces.append(WRAP_INDENT + rest[:step])
        rest = rest[step:]
    return pieces


def find_line(
    lines: Sequence[str], pattern: Matcher, start: int, *, backwards: bool = False
) -> int | None:
    """Index of the next line after ``start`` (or before it, ``backwards``) that matches,
    wrapping around; None when no line matches."""
    count = len(lines)
    if not count:
        return None
    step = -1 if backwards else 1
    for offset in range(1, count + 1):
        index = (start + step * offset) % count
        if pattern.search(lines[index]):
            return index
    return None
