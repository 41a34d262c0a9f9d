"""What ``/server_info`` says about speculative decoding: the config and the lifetime figure.

SGLang 0.5.23 puts its server arguments at the top level of ``/server_info``
(``speculative_algorithm``, ``speculative_num_steps``, ``speculative_eagle_topk``,
``speculative_num_draft_tokens``, ``speculative_draft_model_path``, ``model_path``) and one
``internal_states`` entry per DP rank; an entry repeats the ``speculative_*`` settings the
scheduler actually runs with and, once a decode log interval has passed with speculation,
``avg_spec_accept_length``: accepted tokens / verify steps since start, over the intervals
already logged. ``/flush_cache`` resets it (and removes the key) only while the server is idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.text import known

NO_ALGORITHM = frozenset({"", "none", "null"})


class SpecConfig(msgspec.Struct, frozen=True):
    """The speculative-decoding settings of a server; ``algorithm`` None when it has none."""

    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    draft_model_path: str | None = None

    @property
    def enabled(self) -> bool:
        """True when a speculative algorithm is on."""
        return self.algorithm is not None

    @property
    def summary(self) -> str:
        """``NGRAM, 4 draft tokens, 3 steps, topk 1`` (or ``off``)."""
        if self.algorithm is None:
            return "off"
        return ", ".join([self.algorithm, *known(
            ("{} draft tokens", self.num_draft_tokens), ("{} steps", self.num_steps),
            ("topk {}", self.eagle_topk), ("draft {}", self.draft_model_path or None))])


def spec_config(server_info: Mapping[str, Any]) -> SpecConfig:
    """The config from ``/server_info``: the first rank's running settings, else the server
    arguments."""
    states = internal_states(server_info)
    sources: list[Mapping[str, Any]] = [*states[:1], server_info]
    algorithm = _first(sources, "speculative_algorithm")
    if not isinstance(algorithm, str) or algorithm.strip().lower() in NO_ALGORITHM:
        return SpecConfig()
    return SpecConfig(
        algorithm=algorithm.strip().upper(),
        num_steps=_int(_first(sources, "speculative_num_steps")),
        eagle_topk=_int(_first(sources, "speculative_eagle_topk")),
        num_draft_tokens=_int(_first(sources, "speculative_num_draft_tokens")),
        draft_model_path=_str(_first(sources, "speculative_draft_model_path")),
    )


def internal_states(server_info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``internal_states`` entries (one per DP rank) that are objects."""
    states = server_info.get("internal_states")
    if not isinstance(states, list):
        return []
    return [state for state in states if isinstance(state, Mapping)]


def lifetime_figure(server_info: Mapping[str, Any]) -> AcceptFigure | None:
    """``avg_spec_accept_length``, labelled lifetime; with several DP ranks their mean (SGLang
    gives no weights). None when no rank has the figure yet (or after ``/flush_cache``)."""
    values = _lifetime_values(internal_states(server_info))
    if not values:
        return None
    ranks = f"mean of {len(values)} DP ranks" if len(values) > 1 else "rank 0"
    return AcceptFigure(
        accept_length=sum(values) / len(values),
        source="lifetime",
        window="lifetime",
        basis=f"avg_spec_accept_length, {ranks}",
    )


def _lifetime_values(states: Sequence[Mapping[str, Any]]) -> list[float]:
    values = (state.get("avg_spec_accept_length") for state in states)
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _first(sources: Sequence[Mapping[str, Any]], key: str) -> Any:
    for source in sources:
        if source.get(key) is not None:
            return source[key]
    return None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = ["SpecConfig", "internal_states", "lifetime_figure", "spec_config"]
