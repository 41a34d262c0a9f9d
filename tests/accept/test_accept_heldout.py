"""The held-out split: decided by sample id alone, its fraction respected, a row's variants
(presets, repeats, turns) on their prompt's side."""

from __future__ import annotations

import hashlib

import pytest

from eagle_tui.core.accept.heldout import (
    HeldOutSplit,
    held_out_ids,
    held_out_point,
    is_held_out,
    prompt_id,
)


def test_the_point_is_the_first_eight_bytes_of_the_ids_sha256() -> None:
    digest = hashlib.sha256(b"sample-42").digest()
    assert held_out_point("sample-42") == int.from_bytes(digest[:8], "big") / 2**64


def test_the_split_holds_about_its_fraction_and_grows_with_it() -> None:
    ids = [f"p{i}" for i in range(20_000)]
    five, ten = held_out_ids(ids, 0.05), held_out_ids(ids, 0.10)
    assert len(five) / len(ids) == pytest.approx(0.05, abs=0.005)
    assert len(ten) / len(ids) == pytest.approx(0.10, abs=0.007)
    assert five <= ten  # a larger split keeps every prompt of the smaller one
    assert held_out_ids(ids[:1000], 0.05) == five & set(ids[:1000])  # the file may grow
    assert not is_held_out("p1", 0.0)


@pytest.mark.parametrize(("row", "presets", "prompt"), [
    ("a", (), "a"),
    ("a#t0.7", ("t0.7", "t1"), "a"),
    ("a#t1#r2", ("t0.7", "t1"), "a"),
    ("conv#7#turn3", (), "conv#7"),  # a prompt's own '#' stays
    ("x#r1#turn2", (), "x"),
    ("#t1", ("t1",), "#t1"),  # never strip a whole id away
])
def test_a_rows_prompt_id(row: str, presets: tuple[str, ...], prompt: str) -> None:
    assert prompt_id(row, presets) == prompt


def test_every_row_of_a_prompt_is_on_its_side() -> None:
    split = HeldOutSplit(0.5, ("t0", "t1"))
    for i in range(200):
        base = f"s{i}"
        sides = {split.holds(row) for row in (base, f"{base}#t0", f"{base}#t1#r1",
                                              f"{base}#t0#turn2")}
        assert sides == {is_held_out(base, 0.5)}
