"""Issue 39 item 11, what the dashboard and the verbs say: counts that agree with their nouns,
one GPU note per card, ``--help`` lines that say what the verbs do and how they exit, the
walkthrough's sim timing, and a worker log that never says "again" about a first time."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_tui_capture_view import prompts_file
from test_tui_pty import finished_batch
from tui_fakes import health

from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.health.snapshot import Expectation, Flag
from eagle_tui.core.proc.evidence import TreeEvidence
from eagle_tui.core.sim.config import PHASE_SECONDS
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.tui.cli.main import main
from eagle_tui.tui.render.server import evidence_text, notes_text, window_meter

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = "no GPU information: no NVIDIA driver (NVML Shared Library Not Found)"


def test_one_earlier_start_is_one_start() -> None:
    snapshot = replace(health(), expected=Expectation(600.0, "history", 1))
    label = window_meter(snapshot).label
    assert "1 earlier start" in label and "starts" not in label, label
    snapshot = replace(health(), expected=Expectation(600.0, "history", 3))
    assert "3 earlier starts" in window_meter(snapshot).label


def test_a_card_says_no_gpu_information_once() -> None:
    evidence = TreeEvidence(1000.0, 100, True, 1.0, (), None, gpu_available=False,
                            gpu_reason=NO_GPU)
    snapshot = replace(health(), evidence=evidence, notes=(NO_GPU,),
                       flags=(Flag("stalled", "no log progress for 5m", 60.0),))
    card = notes_text(snapshot) + "\n" + evidence_text(snapshot)
    assert card.count("no GPU information") == 1, card


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_help_says_status_prints_text_and_the_batch_verbs_exit_5(
    capsys: pytest.CaptureFixture[str],
) -> None:
    listing = help_of(["--help"], capsys)
    status = re.search(r"status (.*?) sim ", listing)
    assert status is not None and "JSON snapshot" not in status.group(1)
    assert "text" in status.group(1) and "--json" in status.group(1)
    for verb in ("pause", "stop", "resume"):
        text = help_of([verb, "--help"], capsys)
        assert "5 the batch is in no state for this (e.g. it is done)" in text, (verb, text)


def test_the_walkthrough_states_the_sims_start_up_time() -> None:
    text = " ".join((ROOT / "docs" / "walkthrough.md").read_text().split())
    said = re.search(r"`--time-scale 0\.3` runs its start-up phases at 0\.3 times their "
                     r"default length \(about (\d+) s in all at the default `1`", text)
    assert said is not None, "the walkthrough's --time-scale sentence"
    assert int(said.group(1)) == round(sum(PHASE_SECONDS.values()))
    assert "35 s" not in text


def test_the_worker_log_admits_a_server_before_it_says_again(
    tmp_path: Path, sim_server: SimProcess
) -> None:
    prompts = prompts_file(tmp_path / "p.jsonl", 4)
    batch_id = finished_batch(sim_server, prompts, tmp_path / "out")
    lines = Path(Registry().load(batch_id).log).read_text().splitlines()
    healthy = [line for line in lines if "is healthy" in line]
    assert healthy and "is healthy; sending to it" in healthy[0], healthy
    for n, line in enumerate(lines):
        if "healthy again" in line:
            assert any(" paused: " in earlier for earlier in lines[:n]), lines[: n + 1]
