"""Split a log line into its prefix (timestamps, rank tags, wrapper tags) and its message.

Lines reach a watcher wrapped in whatever wrote them: SGLang's own ``[2026-… TP3]`` (or
``[14:39:07 TP3]`` in 0.3, ``[gpu=0]`` in 0.2), docker-compose's ``sglang-1  | ``, the
``2026-…Z `` of ``docker logs -t`` or ``kubectl logs --timestamps``, Python logging's
``2025-… ,606 - INFO - `` or a custom ``[2026-…][file.py:424][INFO]: ``, vLLM's
``INFO 08-14 20:27:09 file.py:12] ``, glog and torch's
``[rank6]:[E207 01:29:36.73 file.cpp:616] ``, NCCL's ``host:pid:tid [2] ``. Each is peeled
off by its shape, outermost first, so the message underneath is the same whatever wrapped
it and a rank tag survives any wrapper. The first timestamp found dates the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Stamp:
    """A timestamp as the log wrote it. ``year``/``month``/``day`` are None when the format
    leaves them out (``[14:39:07 TP3]``; vLLM's ``08-14 20:27:09`` has no year);
    ``utc`` when the stamp says so (``…Z``)."""

    hour: int
    minute: int
    second: float
    year: int | None = None
    month: int | None = None
    day: int | None = None
    utc: bool = False


@dataclass(frozen=True)
class Prefix:
    """What the peeled prefix said: the stamp, rank tags (``"DP0 TP3"``), a service name
    (docker-compose) and the message left underneath."""

    message: str
    stamp: Stamp | None = None
    stamp_text: str | None = None
    ranks: str = ""
    service: str = ""


_DATE = r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
_TIME = r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2}(?:[.,]\d{1,9})?)"
_RANK = r"(?:(?:DP|PP|TP|EP|CP|ATTN_CP|ATTN_DP|MOE_DP|MOE_EP|PD)\d+|gpu(?:_id)?=\d+)"

# (name, regex) tried in order at the start of what is left; each match is peeled off.
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # sglang-1  | …   (docker compose; the name starts with a letter, so tqdm's "0%|" is safe)
    ("service", re.compile(r"(?P<service>[A-Za-z][\w.-]{0,63}) {0,32}\| ")),
    # 2026-11-30T02:28:44.123456789Z …   (docker logs -t, kubectl --timestamps)
    ("iso", re.compile(_DATE + r"T" + _TIME + r"(?P<z>Z|[+-]\d{2}:?\d{2})? ")),
    # [2026-04-15 17:13:37][scheduler_metrics_mixin.py:424][INFO]: …   (a custom log format)
    (
        "bracket_logging",
        re.compile(r"\[" + _DATE + " " + _TIME + r"\]\[[\w.-]+:\d+\]\[[A-Z]+\]:? "),
    ),
    # [2026-11-30 02:28:44 DP0 TP3] …  [14:39:07 TP3] …  [gpu=0] …  (SGLang)
    (
        "sglang",
        re.compile(
            r"\[(?:(?:" + _DATE + r" )?" + _TIME + r")?(?P<ranks>(?: ?" + _RANK + r")*)\] ?"
        ),
    ),
    # [rank6]:   (torch's per-rank prefix)
    ("torch_rank", re.compile(r"\[(?P<ranks>rank\d+)\]:")),
    # [E207 01:29:36.730311765 file.cpp:616] …  or  I0529 23:23:03.621326 67574 file.cpp:350] …
    (
        "glog",
        re.compile(
            r"\[?[IWEF](?P<mo>\d{1,2})(?P<d>\d{2}) " + _TIME + r"(?: +\d+)? [\w.-]+:\d+\] "
        ),
    ),
    # 2025-02-21 21:52:55,606 - INFO - …   (Python logging's default format)
    ("pylogging", re.compile(_DATE + " " + _TIME + r" - [A-Z]+ - ")),
    # INFO 08-14 20:27:09 custom_all_reduce.py:234] …   (vLLM)
    (
        "vllm",
        re.compile(
            r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d{2})-(?P<d>\d{2}) "
            + _TIME
            + r"(?: [\w.-]+:\d+\])? "
        ),
    ),
    # host:1334:1334 [1] …   (NCCL_DEBUG)
    ("nccl_host", re.compile(r"[\w.-]{1,128}:\d+:\d+ \[\d+\] ")),
)
_MAX_PEELS = 6


def _stamp(m: re.Match[str]) -> Stamp | None:
    groups = m.groupdict()
    if groups.get("h") is None:
        return None
    year = groups.get("y")
    month = groups.get("mo")
    day = groups.get("d")
    return Stamp(
        hour=int(groups["h"]),
        minute=int(groups["mi"]),
        second=float(groups["s"].replace(",", ".")),
        year=int(year) if year else None,
        month=int(month) if month else None,
        day=int(day) if day else None,
        utc=groups.get("z") == "Z",
    )


def _stamp_text(m: re.Match[str]) -> str | None:
    groups = m.groupdict()
    if groups.get("h") is None:
        return None
    clock = f"{groups['h']}:{groups['mi']}:{groups['s']}"
    if groups.get("y"):
        return f"{groups['y']}-{groups['mo']}-{groups['d']} {clock}"
    return clock


def _normal_ranks(text: str) -> str:
    return " ".join(text.replace("gpu_id=", "gpu=").split())


def peel(text: str) -> Prefix:
    """The message under every recognised prefix, with what the prefixes said."""
    rest = text
    stamp: Stamp | None = None
    stamp_text: str | None = None
    ranks = ""
    service = ""
    for _ in range(_MAX_PEELS):
        for name, shape in _SHAPES:
            m = shape.match(rest)
            if m is None or m.end() == 0:
                continue
            groups = m.groupdict()
            if name == "sglang" and not (groups.get("h") or groups.get("ranks")):
                continue  # "[Gloo] …", "[aiter] …": a component tag, part of the message
            if stamp is None:
                stamp, stamp_text = _stamp(m), _stamp_text(m)
            if groups.get("ranks") and not ranks:
                ranks = _normal_ranks(groups["ranks"])
            if name == "service" and not service:
                service = groups["service"]
            rest = rest[m.end() :]
            break
        else:
            break
    return Prefix(rest, stamp, stamp_text, ranks, service)
