"""The ``eagle-tui`` router through the installed console script: a dashboard option and its
value before a verb are not mistaken for the verb (issue 18: ``--theme eagle-dark stats DIR``
read ``eagle-dark`` as the verb), and options given before a verb are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tui_shards import make_row, write_shards

from eagle_tui.core import kimi
from eagle_tui.tui.cli.main import chosen_verb

SCRIPT = Path(sys.executable).with_name("eagle-tui")


def eagle_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    prompt = [kimi.IM_USER, 100, kimi.IM_END, kimi.IM_ASSISTANT, kimi.THINK]
    write_shards(tmp_path / "batch", [make_row(0, prompt, [300, kimi.THINK_END, kimi.IM_END])])
    return tmp_path / "batch" / "shards"


@pytest.mark.parametrize(
    "before", [["--theme", "eagle-dark"], ["--theme=eagle-dark"], ["--refresh", "2", "--readonly"],
               ["--view", "inspect"], ["--log", "stats"]])
def test_options_before_a_verb_are_refused_in_one_line(shards: Path, before: list[str]) -> None:
    result = eagle_tui(*before, "stats", str(shards))
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    option = before[0].split("=")[0]
    assert lines[0].startswith(f"eagle-tui: {option} ") and "'stats'" in lines[0]
    assert "eagle-tui stats --help" in lines[0]


def test_the_same_verb_runs_with_its_options_after_it(shards: Path) -> None:
    result = eagle_tui("stats", str(shards), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == 1


def test_help_before_a_verb_is_still_help() -> None:
    result = eagle_tui("--help", "stats")
    assert result.returncode == 0 and result.stdout.startswith("usage: eagle-tui")


def test_the_verb_is_found_past_option_values() -> None:
    assert chosen_verb(["--theme", "eagle-dark", "stats", "DIR"]) == "stats"
    assert chosen_verb(["--log", "stats"]) is None  # a log file named "stats": the dashboard
    assert chosen_verb(["--url", "http://h:1", "--readonly"]) is None
    assert chosen_verb(["inspect", "--tokenizer", "T", "DIR"]) == "inspect"
    assert chosen_verb(["--view", "nowhere", "stats"]) is None  # the full parser says why


def test_a_verb_first_is_the_verb_even_when_its_option_value_is_bad() -> None:
    # the scan parses the dashboard's --url too; a bad one must not hide the verb
    assert chosen_verb(["watch", "--url", "http://h:99999"]) == "watch"
