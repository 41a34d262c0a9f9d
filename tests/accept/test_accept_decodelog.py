"""The decode log's ``accept len:`` lines, as real SGLang 0.5.23 wrote them with NGRAM."""

from __future__ import annotations

import re

import pytest
from accept_recorded import NO_SPEC, SPEC, exchanges

from eagle_tui.core.accept.decodelog import (
    DecodeLogWindow,
    LogAcceptPoint,
    log_figure,
    points_from_log,
)
from eagle_tui.core.serverlog.events import BatchStats
from eagle_tui.core.serverlog.parser import parse_line

LOG = (SPEC / "decode_log.txt").read_text().splitlines()
ACCEPT = re.compile(r"#running-req: (\d+),.*?accept len: ([\d.]+), accept rate: ([\d.]+)")


def written() -> list[tuple[int, float, float]]:
    """(running, accept len, accept rate) of every decode line, read with a plain regex."""
    found = [ACCEPT.search(line) for line in LOG if "Decode batch" in line]
    return [(int(m[1]), float(m[2]), float(m[3])) for m in found if m]


def test_every_decode_line_gives_a_point_with_its_figures() -> None:
    points = points_from_log(LOG)
    expected = written()
    assert len(expected) == sum("accept len:" in line for line in LOG) > 500
    assert [(p.running, p.accept_length, p.accept_rate) for p in points] == expected


def test_points_are_timed_by_the_lines_stamps() -> None:
    points = points_from_log(LOG)
    assert [p.at_s for p in points] == sorted(p.at_s for p in points)
    first = next(line for line in LOG if "accept len:" in line)
    stamp = re.search(r"\d{4}-\d\d-\d\d (\d\d):(\d\d):(\d\d)", first)
    assert stamp is not None
    assert points[0].at_s == int(stamp[1]) * 3600 + int(stamp[2]) * 60 + int(stamp[3])


def test_a_stamp_past_midnight_carries_on() -> None:
    lines = [line for line in LOG if "accept len:" in line][:2]
    lines = [re.sub(r"\d\d:\d\d:\d\d", "23:59:59", lines[0]),
             re.sub(r"\d\d:\d\d:\d\d", "00:00:01", lines[1])]
    first, second = points_from_log(lines)
    assert second.at_s - first.at_s == 2


def test_the_log_figure_weights_lines_by_their_running_requests() -> None:
    points = points_from_log(LOG)
    figure = log_figure(points)
    weights = sum(r for r, _, _ in written())
    assert figure is not None and figure.source == "decode_log"
    assert figure.accept_length == pytest.approx(sum(r * a for r, a, _ in written()) / weights)
    assert figure.accept_rate == pytest.approx(sum(r * t for r, _, t in written()) / weights)
    assert figure.basis == f"{len(points)} decode lines"
    assert figure.window_s == points[-1].at_s - points[0].at_s
    assert any(p.running == 4 for p in points)  # the concurrent phase


def test_the_serverlog_parser_reads_accept_len_and_rate_from_a_real_line() -> None:
    line = next(line for line in LOG if "accept len: 4.00" in line)
    event = parse_line(line)
    assert isinstance(event, BatchStats) and event.kind == "decode"
    assert (event.accept_length, event.accept_rate) == (4.0, 1.0)
    assert event.running == 1 and event.queued == 0


def test_block_accept_len_is_not_taken_for_accept_len() -> None:
    """SGLang appends ``block accept len:`` after the rate in its DSpark cap-accept mode."""
    line = next(line for line in LOG if "accept len: 1.00" in line)
    line = line.replace("accept len: 1.00, ", "").replace(
        "cpu graph", "block accept len: 3.50, accept len: 1.00, cpu graph")
    event = parse_line(line)
    assert isinstance(event, BatchStats) and event.accept_length == 1.0


def test_without_speculation_decode_lines_have_no_accept_figure() -> None:
    lines = (NO_SPEC / "decode_log.txt").read_text().splitlines()
    decode = [parse_line(line) for line in lines if "Decode batch" in line]
    assert decode and all(isinstance(e, BatchStats) and e.accept_length is None for e in decode)
    assert points_from_log(lines) == []
    assert log_figure([]) is None


def test_the_window_keeps_only_its_last_seconds() -> None:
    points = points_from_log(LOG)
    window = DecodeLogWindow(5.0)
    for point in points:
        window.add(point)
    end = points[-1].at_s
    inside = [p for p in points if p.at_s >= end - 5.0]
    assert window.figure() == log_figure(inside)
    with pytest.raises(ValueError, match="positive"):
        DecodeLogWindow(-1)


def test_one_line_is_one_log_interval() -> None:
    figure = log_figure([LogAcceptPoint(3.0, 2.5, 0.5, 1)])
    assert figure is not None and figure.window == "one log interval" and figure.window_s is None


def test_at_one_line_per_iteration_the_weighted_log_figure_is_exact() -> None:
    """Recorded with --decode-log-interval 1: each line covers one iteration, whose verify
    steps are its #running-req, so Σ accept len x running is every accepted token (bonus
    included) and the weighted figure is (Σverify + Σcorrect drafts) / Σverify of all the
    recorded answers (1 + drafts accepted per step, the prefill token left out)."""
    meta = [e.meta for e in exchanges()]
    verify = sum(m["spec_verify_ct"] for m in meta)
    correct = sum(m["spec_num_correct_drafts"] for m in meta)
    points = points_from_log(LOG)
    assert sum(p.running for p in points) == verify
    figure = log_figure(points)
    assert figure is not None
    assert figure.accept_length == pytest.approx((verify + correct) / verify, rel=1e-12)
