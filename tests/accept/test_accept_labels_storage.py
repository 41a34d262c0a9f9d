"""`accept`'s stored results say whose figure they hold (issue 39 items 2 and 3), against
simulated speculative servers (real processes, real sockets):

- `--against B --label L` stores both sides, L on B's result (the server measured against A),
  A's unlabelled; a later run of B compares with B's own figure, naming label and server;
- `--no-store` compares with the stored results without adding to them (as its help says);
- a server that does not speculate measured nothing: an alarm naming it, exit 1, on either
  side of an A/B."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_accept_cli import FAST, SPEC, TOKENIZER, cli, write_prompts

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow


def accept(*args: str) -> tuple[int, dict[str, Any]]:
    done = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "96", "--json", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def stored(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[SimProcess, SimProcess, SimProcess]]:
    """A (the baseline drafter), B (a better one), and a server without speculation."""
    with SimProcess([*FAST, *SPEC]) as a, \
            SimProcess([*FAST, *SPEC, "--sim-draft-acceptance", "0.95"]) as b, \
            SimProcess(FAST) as plain:
        for sim in (a, b, plain):
            sim.wait_ready(timeout=60)
        yield a, b, plain


def test_an_ab_stores_both_sides_and_labels_b(
        servers: tuple[SimProcess, SimProcess, SimProcess], tmp_path: Path) -> None:
    a, b, _ = servers
    prompts = write_prompts(tmp_path / "p.jsonl", 9)
    results = tmp_path / "accept-results.jsonl"
    code, ab = accept("--prompts", str(prompts), "--server", a.url, "--against", b.url,
                      "--label", "v2")
    assert code == 0 and ab["stored_in"] == str(results) and ab["label"] == "v2"
    a_figure = ab["overall"]["accept_length"]
    b_figure = ab["against"]["overall"]["accept_length"]
    assert b_figure > a_figure + 0.1  # B is the better drafter
    first, second = stored(results)
    assert (first["server"], first["label"]) == (a.url, "")
    assert first["report"]["overall"]["accept_length"] == a_figure
    assert (second["server"], second["label"]) == (b.url, "v2")
    assert second["report"]["overall"]["accept_length"] == b_figure

    # later: v2 alone, compared with what v2 measured (not A's figure under v2's name)
    code, later = accept("--prompts", str(prompts), "--server", b.url, "--label", "v2")
    assert code == 0
    comparison = later["comparison"]
    assert comparison["previous_label"] == "v2" and comparison["previous_server"] == b.url
    overall = comparison["changes"][0]
    assert overall["before"] == pytest.approx(b_figure) and abs(overall["change"]) < 1e-9
    assert [r["label"] for r in stored(results)] == ["", "v2", "v2"]

    text = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "96", "--prompts",
               str(prompts), "--server", a.url, "--against", b.url, "--label", "v3").stdout
    assert f"{b.url} against the stored result of" in text and f"(v2, {b.url}):" in text
    assert f"stored both results in {results} (B's labelled 'v3', A's unlabelled)" in text


def test_no_store_compares_without_storing(
        servers: tuple[SimProcess, SimProcess, SimProcess], tmp_path: Path) -> None:
    a, b, _ = servers
    prompts = write_prompts(tmp_path / "p.jsonl", 9)
    results = tmp_path / "accept-results.jsonl"
    code, _ = accept("--prompts", str(prompts), "--server", b.url, "--label", "good")
    assert code == 0 and len(stored(results)) == 1
    before = results.read_bytes()
    code, measured = accept("--prompts", str(prompts), "--server", a.url, "--no-store")
    assert code == 1  # compared: A is worse than the stored result, a fell alarm
    assert measured["stored_in"] is None and measured["compared_with"] == str(results)
    assert measured["comparison"]["previous_label"] == "good"
    assert "fell" in {alarm["kind"] for alarm in measured["alarms"]}
    assert results.read_bytes() == before
    text = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "96", "--prompts",
               str(prompts), "--server", a.url, "--no-store").stdout
    assert "against the stored result of" in text and "not stored (--no-store)" in text
    assert results.read_bytes() == before


def test_a_server_without_speculation_is_an_alarm_naming_it(
        servers: tuple[SimProcess, SimProcess, SimProcess], tmp_path: Path) -> None:
    a, _, plain = servers
    prompts = write_prompts(tmp_path / "p.jsonl", 6)
    code, out = accept("--prompts", str(prompts), "--server", plain.url, "--no-store")
    assert code == 1 and out["overall"]["verify_steps"] == 0
    [alarm] = out["alarms"]
    assert alarm["kind"] == "not_speculating" and plain.url in alarm["message"]
    assert "speculative decoding is off" in alarm["message"]
    done = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "96", "--prompts",
               str(prompts), "--server", plain.url, "--no-store")
    assert done.returncode == 1
    assert f"ALARM not_speculating: {plain.url} measured nothing" in done.stdout

    # on B's side of an A/B too: it counts, and is printed
    code, ab = accept("--prompts", str(prompts), "--server", a.url, "--against", plain.url,
                      "--no-store")
    assert code == 1 and ab["alarms"] == []
    assert [x["kind"] for x in ab["against"]["alarms"]] == ["not_speculating"]
