"""SGLang's own start-up figures: the ``Engine startup timings (s): …`` log line (0.5.23) and
``/server_info`` ``startup_time``, as one flat mapping of seconds.

``load_weight`` (loading_weights), ``kv_cache_allocation`` (allocating_kv), ``cuda_graph``
(capturing_graphs: the sum of its ``prefill``, ``decode``, ``target_verify``… passes),
``scheduler_e2e`` (a rank's whole start) and ``tokenizer_e2e`` (from the engine's launch until
every rank reported ready). History keeps them with each ready start-up
(``history.StartupRecord.server_timings``), and the expected window and phase figures come
from them where they exist (docs/startup-diagnosis.md, "Calibrated windows").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eagle_tui.core.health.phase import Phase

MARKER = "Engine startup timings (s):"
PHASE_FIGURES: Mapping[str, Phase] = {
    "load_weight": Phase.LOADING_WEIGHTS,
    "kv_cache_allocation": Phase.ALLOCATING_KV,
    "cuda_graph": Phase.CAPTURING_GRAPHS,
}
WHOLE_FIGURES = ("tokenizer_e2e", "scheduler_e2e")
"""The end-to-end figures, best first."""

_PAIR = re.compile(r"(\w+)=(\{[^}]*\}|[-+0-9.eE]+)")


def parse_log_line(text: str) -> dict[str, float] | None:
    """The figures of an ``Engine startup timings (s): …`` line; None for any other line."""
    at = text.find(MARKER)
    if at < 0:
        return None
    found: dict[str, float] = {}
    for name, value in _PAIR.findall(text[at + len(MARKER) :]):
        if value.startswith("{"):
            parts = [float(v) for _, v in _PAIR.findall(value) if _number(v)]
            found[name] = sum(parts)
        elif _number(value):
            found[name] = float(value)
    return found or None


def from_server_info(info: Mapping[str, Any]) -> dict[str, float]:
    """The figures of ``/server_info``'s ``startup_time`` (empty when it has none)."""
    raw = info.get("startup_time")
    if not isinstance(raw, Mapping):
        return {}
    found: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, Mapping):
            found[str(name)] = sum(float(v) for v in value.values() if _is_number(v))
        elif _is_number(value):
            found[str(name)] = float(value)
    return found


def end_to_end(figures: Mapping[str, float]) -> float | None:
    """The server's own start-up time (``tokenizer_e2e``, else ``scheduler_e2e``)."""
    return next((figures[name] for name in WHOLE_FIGURES if name in figures), None)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
