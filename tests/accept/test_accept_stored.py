"""Stored acceptance results: the JSON Lines file, its faults, and the comparison."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from accept_recorded import Exchange, exchanges, in_phases, replayed, server_info

from eagle_tui.core.accept.config import spec_config
from eagle_tui.core.accept.stored import (
    RESULTS_FILE,
    ResultKey,
    StoredResult,
    append_result,
    compare,
    latest_comparable,
    load_results,
    prompt_set_id,
)
from eagle_tui.core.accept.summary import report
from eagle_tui.core.errors import AcceptResultError

CHAT = in_phases("chat")


def key(**changes: object) -> ResultKey:
    info = server_info("before")
    base = ResultKey(
        target=info["model_path"],
        spec=spec_config(info),
        prompt_set=prompt_set_id(e.key for e in CHAT),
        temperature=0.0,
        max_new_tokens=32,
    )
    return msgspec.structs.replace(base, **changes)


def result(items: list[Exchange], label: str, when: str,
           result_key: ResultKey | None = None) -> StoredResult:
    return StoredResult(key=result_key or key(), server="http://127.0.0.1:40547",
                        created_at=when, report=report(replayed(items)), label=label)


def ratio(items: list[Exchange]) -> float:
    return (sum(e.meta["completion_tokens"] for e in items)
            / sum(e.meta["spec_verify_ct"] for e in items))


def test_results_append_and_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    assert load_results(path) == []
    first = result(CHAT[1:], "warm", "2026-12-01T21:51:00Z")
    second = result(CHAT, "all", "2026-12-01T21:52:00Z")
    append_result(path, first)
    append_result(path, second)
    assert load_results(path) == [first, second]
    assert path.read_bytes().count(b"\n") == 2
    assert not list(tmp_path.glob("*.tmp"))


def test_a_fall_of_more_than_a_tenth_raises_an_alarm_per_category() -> None:
    """Stored: chat answered warm (4.5 a step); now: the same prompts with the cold answer
    among them. The figures are SGLang's, recomputed from the raw answers."""
    before = result(CHAT[1:], "warm", "t0")
    now = result(CHAT, "cold one", "t1")
    comparison = compare(before, now)
    by_name = {c.category: c for c in comparison.changes}
    assert [c.category for c in comparison.changes] == ["overall", "chat"]
    assert by_name["chat"].before == pytest.approx(ratio(CHAT[1:]))
    assert by_name["chat"].now == pytest.approx(ratio(CHAT))
    assert by_name["chat"].change == pytest.approx(ratio(CHAT) - ratio(CHAT[1:]))
    assert [a.kind for a in comparison.alarms] == ["fell", "fell"]
    assert f"fell {ratio(CHAT[1:]) - ratio(CHAT):.2f}" in comparison.alarms[1].message
    assert comparison.previous_label == "warm"
    assert compare(now, before).alarms == []  # a rise is no alarm


def test_a_category_on_one_side_only_has_no_change() -> None:
    both = list(exchanges())
    before = result([e for e in both if e.category != "repeat"], "a", "t0")
    now = result(both, "b", "t1")
    change = {c.category: c for c in compare(before, now).changes}["repeat"]
    assert change.before is None and change.now is not None and change.change is None


def test_only_results_with_the_same_key_compare() -> None:
    stored = [result(CHAT, "old", "t0"), result(CHAT, "other config", "t1",
                                                key(spec=msgspec.structs.replace(
                                                    key().spec, num_draft_tokens=8))),
              result(CHAT, "newest", "t2"), result(CHAT, "other prompts", "t3",
                                                   key(prompt_set=prompt_set_id(["x"])))]
    found = latest_comparable(stored, key())
    assert found is not None and found.label == "newest"
    assert latest_comparable(stored, key(target="/other/model")) is None
    assert latest_comparable(stored, key(temperature=1.0)) is None
    with pytest.raises(ValueError, match="different"):
        compare(stored[0], stored[1])


def test_the_prompt_set_id_ignores_order_and_repeats() -> None:
    keys = [e.key for e in CHAT]
    assert prompt_set_id(keys) == prompt_set_id(reversed(keys)) == prompt_set_id(keys + keys)
    assert prompt_set_id(keys) != prompt_set_id(keys[1:])
    assert prompt_set_id(keys).startswith("sha256:") and len(prompt_set_id(keys)) == 23


def test_a_file_that_does_not_parse_is_named_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    append_result(path, result(CHAT, "kept", "t0"))
    good = path.read_bytes()
    path.write_bytes(good + b"{not json\n")
    with pytest.raises(AcceptResultError, match=rf"{RESULTS_FILE}:2: not JSON"):
        load_results(path)
    with pytest.raises(AcceptResultError):
        append_result(path, result(CHAT, "new", "t1"))
    assert path.read_bytes() == good + b"{not json\n"


def test_a_line_of_another_shape_or_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(b'{"label": "x"}\n')
    with pytest.raises(AcceptResultError, match=":1: not a stored acceptance result"):
        load_results(path)
    newer = msgspec.structs.replace(result(CHAT, "future", "t0"), version=2)
    path.write_bytes(msgspec.json.encode(newer) + b"\n")
    with pytest.raises(AcceptResultError, match="format version 2"):
        load_results(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_directory_that_cannot_be_written_keeps_the_old_results(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    append_result(path, result(CHAT, "kept", "t0"))
    good = path.read_bytes()
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(AcceptResultError, match="results stored before are unchanged"):
            append_result(path, result(CHAT, "new", "t1"))
    finally:
        tmp_path.chmod(0o700)
    assert path.read_bytes() == good


def test_a_write_that_fails_keeps_the_old_results(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk at the write: the atomic replace never happens."""
    path = tmp_path / RESULTS_FILE
    append_result(path, result(CHAT, "kept", "t0"))
    good = path.read_bytes()

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(AcceptResultError, match=r"disk full \(ENOSPC\).*unchanged"):
        append_result(path, result(CHAT, "new", "t1"))
    assert path.read_bytes() == good
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unreadable_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(AcceptResultError, match="cannot read"):
        load_results(tmp_path)  # a directory
