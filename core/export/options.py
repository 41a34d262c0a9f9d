"""What an export writes and which rows it keeps: formats, mask start, row filters.

Mask start (where ``loss_mask`` turns to 1):

``prompt``
    ``[0] * prompt_len + [1] * (len - prompt_len)``: every generated id is trained. This is
    the mask speculators writes itself (``regenerate-responses``), and speculators shifts
    the mask together with its targets (``shift_batch``), so it is right there.
``prompt-1``
    the mask starts one earlier, at the prompt's last id (Kimi's ``<think>``, 163606).
    SpecForge shifts the targets and input ids left by one but not the loss mask
    (``TargetHead.preprocess`` / ``padding(..., left=False)``), so mask position ``i`` gates
    the prediction speculators gates with position ``i + 1``. Starting one earlier trains
    the same span as speculators' ``prompt`` (and as SpecForge's own Kimi template, whose
    mask starts right after the assistant header, i.e. at ``<think>``).

Default rows dropped: the flags whose rows are not the model's exact tokens for the prompt
sent (see :data:`DEFAULT_DROP_FLAGS`); every other flag describes what the model did and is
kept unless asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.validate import FLAGS, NOT_EXPORTED_BY_DEFAULT

ExportFormat = Literal["speculators", "specforge", "parquet"]
MaskStart = Literal["prompt", "prompt-1"]
FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
MASK_STARTS: tuple[MaskStart, ...] = get_args(MaskStart)

DEFAULT_MASK_START: dict[ExportFormat, MaskStart] = {
    "speculators": "prompt",
    "specforge": "prompt-1",
    "parquet": "prompt",
}

DEFAULT_DROP_FLAGS: tuple[str, ...] = (
    "aborted",  # the server cut the generation off mid-way: a tail no model would end on
    "count_mismatch",  # we did not receive exactly the ids the server counted
    "prompt_count_mismatch",  # the server generated from a prompt other than the one stored
    "bad_token_id",  # ids outside the vocabulary are not the model's tokens at all
    *sorted(NOT_EXPORTED_BY_DEFAULT),  # more ids than asked for: not the answer requested
)
"""Rows flagged with any of these are not the model's exact continuation of the stored
prompt. Every other flag (``truncated``, ``no_think_end``, ``no_stop_token``, tool calls…)
still stores ids the model generated for that prompt, possibly a prefix of them."""

FINISH_REASONS = ("stop", "length", "abort")


@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which rows an export keeps: none flagged with ``drop_flags``, and (when ``finish``
    is set) only those with one of those finish reasons."""

    drop_flags: frozenset[str] = frozenset(DEFAULT_DROP_FLAGS)
    finish: frozenset[str] | None = None

    @classmethod
    def build(
        cls,
        *,
        keep_flags: Iterable[str] = (),
        drop_flags: Iterable[str] = (),
        finish: Iterable[str] | None = None,
    ) -> RowFilter:
        """The default filter adjusted by ``--keep-flag`` / ``--drop-flag`` / ``--finish``;
        ConfigError names an unknown flag or finish reason."""
        keep, drop = _known_flags(keep_flags), _known_flags(drop_flags)
        both = keep & drop
        if both:
            raise ConfigError(f"flag(s) {', '.join(sorted(both))} both kept and dropped")
        finishes = None if finish is None else frozenset(_known_finishes(finish))
        return cls((frozenset(DEFAULT_DROP_FLAGS) - keep) | drop, finishes)

    def reason(self, flags: Iterable[str], finish_reason: str) -> str | None:
        """Why a row is dropped (the first dropping flag in FLAGS order, else
        ``finish=<reason>``), or None when it is kept."""
        for flag in flags:
            if flag in self.drop_flags:
                return flag
        if self.finish is not None and finish_reason not in self.finish:
            return f"finish={finish_reason}"
        return None


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """One export: format, mask start (None: the format's default), filter, the length
    a trainer will be run with (reported, never applied), and whether to replace an
    existing output, and whether some ``--shard`` slices of a job may be exported without
    the others (``allow_partial``; refused otherwise)."""

    format: ExportFormat
    mask_start: MaskStart | None = None
    filter: RowFilter = RowFilter()
    max_length: int | None = None
    force: bool = False
    allow_partial: bool = False
    include_held_out: bool = False  # rows of a batch's held-out split (left out by default)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown export format {self.format!r}; one of {FORMATS}")
        if self.mask_start is not None and self.mask_start not in MASK_STARTS:
            raise ConfigError(f"unknown mask start {self.mask_start!r}; one of {MASK_STARTS}")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"--max-length must be positive, got {self.max_length}")

    @property
    def effective_mask_start(self) -> MaskStart:
        """The mask start used: the one asked for, or the format's default."""
        return self.mask_start or DEFAULT_MASK_START[self.format]


def mask_offset(mask_start: MaskStart) -> int:
    """How far before ``prompt_len`` the mask starts (0 or 1)."""
    return 1 if mask_start == "prompt-1" else 0


def _known_flags(names: Iterable[str]) -> frozenset[str]:
    chosen = frozenset(names)
    unknown = sorted(chosen - set(FLAGS))
    if unknown:
        raise ConfigError(
            f"unknown flag(s) {', '.join(unknown)}; flags are: {', '.join(FLAGS)}"
        )
    return chosen


def _known_finishes(names: Iterable[str]) -> list[str]:
    chosen = [name.strip() for name in names if name.strip()]
    unknown = sorted(set(chosen) - set(FINISH_REASONS))
    if unknown or not chosen:
        raise ConfigError(
            f"--finish takes finish reasons from {', '.join(FINISH_REASONS)}, "
            f"got {', '.join(unknown) or 'none'}"
        )
    return chosen
