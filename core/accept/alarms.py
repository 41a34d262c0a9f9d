"""Alarms about acceptance, each with the next step to take.

- ``stuck_at_one``: speculation is on, yet every verify step accepts no draft (accept length
  1.00 ± 0.005 over a window). The known cause: an EAGLE3 draft launched with
  ``--speculative-algorithm EAGLE`` (sglang PR #21272); SGLang prints no error.
- ``fell``: a category's accept length fell by more than 0.1 against the stored result for
  the same target, config and prompt set (a new drafter that is worse on these prompts).
- ``not_speculating``: a replay's answers had no verify step at all, so nothing was measured
  (the server runs without speculative decoding, or every answer was one token): the wrong
  server, named, rather than a table of ``-`` read as a result.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eagle_tui.core.accept.config import SpecConfig
from eagle_tui.core.accept.figures import AcceptFigure

STUCK_AT_ONE_TOLERANCE = 0.005
FALL_THRESHOLD = 0.1

AlarmKind = Literal["stuck_at_one", "fell", "not_speculating"]


class Alarm(msgspec.Struct, frozen=True):
    """What is wrong (``message``) and what to do (``next_step``)."""

    kind: AlarmKind
    message: str
    next_step: str


def tokens_per_step(figure: AcceptFigure, config: SpecConfig) -> float:
    """Tokens per verify step without the prefill token: exactly 1.00 when no draft is
    accepted. The metrics figure counts each answer's prefill token (8 tokens / 7 steps for a
    real 8-token answer that accepted nothing), so it is 1 + accepted drafts per step when the
    window's accept rate is known; the log and lifetime figures already leave it out."""
    drafts = (config.num_draft_tokens or 0) - 1
    if figure.source == "metrics" and figure.accept_rate is not None and drafts > 0:
        return 1.0 + figure.accept_rate * drafts
    return figure.accept_length


def stuck_at_one(figure: AcceptFigure | None, config: SpecConfig) -> Alarm | None:
    """The alarm when a speculating server accepts 1.00 ± 0.005 tokens per verify step."""
    if figure is None or not config.enabled:
        return None
    per_step = tokens_per_step(figure, config)
    if abs(per_step - 1.0) > STUCK_AT_ONE_TOLERANCE:
        return None
    return Alarm(
        kind="stuck_at_one",
        message=(
            f"{per_step:.3f} tokens per verify step over {figure.window} "
            f"({figure.source.replace('_', ' ')}) with {config.summary}: "
            "no draft token is ever accepted"
        ),
        next_step=(
            "an EAGLE3 draft under EAGLE? check --speculative-algorithm (an EAGLE3 drafter "
            "needs --speculative-algorithm EAGLE3)"
        ),
    )


def fell(category: str, before: float | None, now: float | None) -> Alarm | None:
    """The alarm when ``now`` is more than 0.1 below ``before`` (a stored result's figure)."""
    if before is None or now is None or before - now <= FALL_THRESHOLD:
        return None
    return Alarm(
        kind="fell",
        message=f"{category}: accept length fell {before - now:.2f} ({before:.2f} -> {now:.2f})"
                " since the stored result for this target, config and prompt set",
        next_step=(
            "compare the drafters on held-out and on real traffic; a drafter tuned on narrow "
            "data can lose on the rest (look at per_position: which draft position dropped)"
        ),
    )


def not_speculating(server: str, config: SpecConfig, answers: int,
                    verify_steps: int) -> Alarm | None:
    """The alarm when ``server`` gave ``answers`` answers and not one verify step."""
    if answers == 0 or verify_steps > 0:
        return None
    why = ("its /server_info says speculative decoding is off" if not config.enabled else
           f"it reports {config.summary}, yet no answer had a verify step")
    return Alarm(
        kind="not_speculating",
        message=f"{server} measured nothing: {answers} answers, 0 verify steps ({why})",
        next_step=("point --server (or --against) at the server that runs the drafter "
                   "(--speculative-algorithm and --speculative-draft-model-path); if it does, "
                   "raise --max-new-tokens (a one-token answer has no verify step)"),
    )


__all__ = [
    "FALL_THRESHOLD",
    "STUCK_AT_ONE_TOLERANCE",
    "Alarm",
    "AlarmKind",
    "fell",
    "not_speculating",
    "stuck_at_one",
    "tokens_per_step",
]
