"""The log follower on temporary files: tail start, \\r bars, rotation, truncation, errors."""

from __future__ import annotations

import os
import random
from pathlib import Path

from eagle_tui.core.serverlog.follower import LogFollower


def _write(path: Path, text: str | bytes, mode: str = "a") -> None:
    data = text.encode() if isinstance(text, str) else text
    with open(path, mode + "b") as out:
        out.write(data)


def test_starts_from_a_bounded_tail_and_drops_the_cut_first_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "".join(f"line {i:04d}\n" for i in range(1000)))
    with LogFollower(log, tail_bytes=100) as follower:
        chunk = follower.read()
    assert chunk.lines[-1] == "line 0999"
    assert all(line.startswith("line ") and len(line) == 9 for line in chunk.lines)
    assert len(chunk.lines) <= 10
    assert chunk.notes == ("opened",)


def test_a_tail_that_starts_on_a_line_boundary_keeps_that_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "first\n" + "second\n")
    with LogFollower(log, tail_bytes=len("second\n")) as follower:
        assert follower.read().lines == ("second",)


def test_from_start_reads_everything(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "".join(f"{i}\n" for i in range(500)))
    with LogFollower(log, tail_bytes=10, from_start=True) as follower:
        assert len(follower.read().lines) == 500


def test_splits_on_carriage_returns_and_keeps_the_live_bar_as_partial(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "a\r\nb\n\rLoading:  10% Completed | 1/10 [")
    follower = LogFollower(log)
    first = follower.read()
    assert first.lines == ("a", "b")
    assert first.partial == "Loading:  10% Completed | 1/10 ["
    _write(log, "\rLoading:  20% Completed | 2/10 [")
    second = follower.read()
    assert second.lines == ("Loading:  10% Completed | 1/10 [",)
    assert second.partial == "Loading:  20% Completed | 2/10 ["
    assert follower.read().lines == ()
    follower.close()


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "one\ntwo\n")
    follower = LogFollower(log)
    assert follower.read().lines == ("one", "two")
    _write(log, "three\nunterminated")  # written after our read, before the rotation
    os.rename(log, tmp_path / "server.log.1")
    _write(log, "four\n", mode="w")
    chunk = follower.read()
    assert chunk.lines == ("three", "unterminated", "four")
    assert "rotated" in chunk.notes
    follower.close()


def test_truncation_restarts_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "aaaa\nbbbb\ncccc\n")
    follower = LogFollower(log)
    follower.read()
    _write(log, "new\n", mode="w")
    chunk = follower.read()
    assert chunk.lines == ("new",)
    assert "truncated" in chunk.notes
    follower.close()


def test_truncation_rewritten_past_the_old_offset_is_still_noticed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, "short\n")
    follower = LogFollower(log)
    follower.read()
    _write(log, "".join(f"rewritten {i}\n" for i in range(5)), mode="w")
    chunk = follower.read()
    assert chunk.lines == tuple(f"rewritten {i}" for i in range(5))
    assert "truncated" in chunk.notes
    follower.close()


def test_missing_then_appearing_file(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    follower = LogFollower(log)
    missing = follower.read()
    assert missing.lines == ()
    assert missing.error is not None and "does not exist" in missing.error
    _write(log, "hello\n")
    assert follower.read().lines == ("hello",)
    follower.close()


def test_unreadable_path_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "dir.log").mkdir()
    follower = LogFollower(tmp_path / "dir.log")
    chunk = follower.read()
    assert chunk.error is not None and "cannot read" in chunk.error
    follower.close()


def test_invalid_utf8_and_huge_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _write(log, b"bad \xff\xfe bytes\n" + b"x" * 5000)
    follower = LogFollower(log, max_partial_bytes=1000)
    chunk = follower.read()
    assert chunk.lines[0] == "bad \ufffd\ufffd bytes"
    assert chunk.lines[1] == "x" * 5000
    assert chunk.partial == ""
    follower.close()


def test_no_line_is_lost_across_random_rotations_and_truncations(tmp_path: Path) -> None:
    """Writes, renames and truncations interleaved at random; every line arrives, in order.

    Truncation drops what was never read, as ``tail -F`` would, so the writer truncates
    only after the follower has read. Rotation may come with unread lines in the old file,
    but not twice between two reads (a file rotated away unseen cannot be found again).
    """
    rng = random.Random(7)
    log = tmp_path / "server.log"
    _write(log, "", mode="w")
    follower = LogFollower(log, from_start=True)
    written: list[str] = []
    seen: list[str] = []
    rotated_since_read = False
    for step in range(400):
        action = rng.random()
        if action < 0.08:
            if rotated_since_read:
                seen.extend(follower.read().lines)
            os.replace(log, tmp_path / f"server.log.{step}")
            _write(log, "", mode="w")
            rotated_since_read = True
            continue
        elif action < 0.14:
            seen.extend(follower.read().lines)
            rotated_since_read = False
            _write(log, "", mode="w")
        else:
            lines = [f"event {len(written) + i}" for i in range(rng.randint(1, 5))]
            written.extend(lines)
            _write(log, "".join(x + rng.choice(["\n", "\r", "\r\n"]) for x in lines))
        if rng.random() < 0.5:
            seen.extend(follower.read().lines)
            rotated_since_read = False
    seen.extend(follower.read().lines)
    follower.close()
    assert seen == written
