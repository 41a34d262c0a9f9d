"""The recorded real SGLang 0.5.23 NGRAM artefacts (tests/fixtures/realsglang-spec), loaded
as they are: tests recompute every expected figure from these raw answers themselves."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from eagle_tui.core.accept.requests import request_acceptance
from eagle_tui.core.accept.summary import ReplayedRequest

SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "realsglang-spec"
NO_SPEC = SPEC / "no-spec"
PHASES = ("chat", "cycle42", "cycle242", "cycle280", "repeat")


@dataclass(frozen=True)
class Exchange:
    """One recorded ``/generate``: its phase, category, key, client times and SGLang's body."""

    phase: str
    category: str
    key: str
    started_s: float
    finished_s: float
    body: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.body["meta_info"])

    @property
    def output_ids(self) -> list[int]:
        return list(self.body["output_ids"])


@cache
def exchanges(folder: Path = SPEC) -> tuple[Exchange, ...]:
    rows = [json.loads(line) for line in (folder / "generate.jsonl").read_text().splitlines()]
    assert all(row["status"] == 200 for row in rows)
    return tuple(
        Exchange(r["phase"], r["category"], r["key"], r["started_s"], r["finished_s"], r["body"])
        for r in rows
    )


def in_phases(*phases: str, folder: Path = SPEC) -> list[Exchange]:
    return [e for e in exchanges(folder) if e.phase in phases]


def replayed(items: list[Exchange]) -> list[ReplayedRequest]:
    """What a replay would hand to ``core.accept.summary``."""
    return [
        ReplayedRequest(
            key=e.key,
            category=e.category,
            acceptance=request_acceptance(e.meta),
            output_ids=tuple(e.output_ids),
            started_s=e.started_s,
            finished_s=e.finished_s,
        )
        for e in items
    ]


def server_info(when: str, folder: Path = SPEC) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((folder / f"server_info_{when}.json").read_text())
    return info


def metrics_text(when: str, folder: Path = SPEC) -> str:
    return (folder / f"metrics_{when}.txt").read_text()


def series_value(text: str, name: str) -> float | None:
    """The sum of a series' samples, read the plain way (name, labels, value per line)."""
    total = None
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


def decode_lines(folder: Path = SPEC) -> list[str]:
    """The server log written during the recording."""
    return (folder / "decode_log.txt").read_text().splitlines()
