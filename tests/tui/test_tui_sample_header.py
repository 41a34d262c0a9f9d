"""Issue 20 (Low): a row with no ``</think>`` reads ``think_end at none`` in the dashboard's
sample header, as ``eagle-tui inspect`` prints it, never ``think_end at -1``."""

from __future__ import annotations

from tui_shards import make_row

from eagle_tui.core import kimi
from eagle_tui.tui.screens.sample import sample_header


def test_no_think_end_reads_none_as_in_the_cli() -> None:
    without = make_row(1, [1, 2, 3], [10, 11, kimi.IM_END], flags=("no_think_end",))
    assert without.think_end == -1
    header = sample_header(without)
    assert "think_end at none" in header and "-1" not in header
    with_end = make_row(2, [1, 2, 3], [10, kimi.THINK_END, 12, kimi.IM_END])
    assert f"think_end at {with_end.think_end} " in sample_header(with_end)
