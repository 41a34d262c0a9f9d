"""Every option of every verb, fed hostile values: one line on stderr naming the option,
exit status 2, no traceback, nothing created on disk (issue 24, issue 20 item 18).

The options are read from the real parsers ``eagle_tui.tui.cli.main.build_parser`` builds,
so a new option is fuzzed as soon as it exists; its ``type`` must be one this file knows
(``ACCEPTS``), or it is listed in ``EXEMPT`` with the reason any value is fine. Each value
a type could legitimately accept (``0`` for a count that may be 0, a new directory name for
``--out``) is skipped for that option by ``ACCEPTS``, which is written here from the rules
in docs, independently of the code under test.

The verb's ``run`` is replaced by one that fails the case: a hostile value must be refused
while parsing, before anything runs.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from eagle_tui.core import argtypes
from eagle_tui.tui import dashboard

cli_main = importlib.import_module("eagle_tui.tui.cli.main")  # the package re-exports main()

LONG_DIGITS = "9" * 5000
NESTED = "k=" + "[" * 5000 + "]" * 5000

# The hostile values; "{dir}", "{fifo}" are replaced by real ones made for the test.
HOSTILE: tuple[str, ...] = (
    "", " ", "abc", "1.5", "-1", "0", "nan", "NaN", "inf", "-inf", "+Infinity", "1e400",
    "-1e400", "1e30", "99999999999999999999999999", LONG_DIGITS, "0x10", "\x1b[2J",
    "{dir}", "{fifo}", "/dev/zero", "/nonexistent-eagle/dir/x", "{bad", "k=", "k={bad",
    NESTED, "http://[::1", "http://127.0.0.1:99999", "1/1", "0/0", "a/b",
)

NAME_MAX = 255


@dataclass(frozen=True)
class Case:
    """One option of one verb: where it is and the action argparse holds for it."""

    verb: str | None  # None: the dashboard (no verb)
    action: argparse.Action

    @property
    def name(self) -> str:
        return self.action.option_strings[0] if self.action.option_strings else self.action.dest

    @property
    def id(self) -> str:
        return f"{self.verb or 'dashboard'} {self.name}"


EXEMPT: dict[tuple[str | None, str], str] = {
    ("batches", "batch"): "a batch name, id or directory: any text, looked up when it runs",
    ("pause", "batch"): "a batch name, id or directory: any text, looked up when it runs",
    ("resume", "batch"): "a batch name, id or directory: any text, looked up when it runs",
    ("stop", "batch"): "a batch name, id or directory: any text, looked up when it runs",
    ("watch", "command"): "the server's own command line after --: passed on as it is",
}


def _int_text(value: str) -> int | None:
    if not re.fullmatch(r"\s*[+-]?\d{1,100}\s*", value):
        return None
    return int(value)


def _float_value(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _whole(t: argtypes.Whole, value: str) -> bool:
    number = _int_text(value)
    return number is not None and t.low <= number <= t.high


def _number(t: argtypes.Number, value: str) -> bool:
    number = _float_value(value)
    if number is None:
        return False
    return (number > t.low if t.above else number >= t.low) and number <= t.high


def _kind(value: str) -> str | None:
    """'dir', 'file', 'other' for what is at ``value`` (relative to the empty work dir),
    'long' for a name no file system holds, None when nothing is there."""
    if any(len(part) > NAME_MAX for part in value.split("/")):
        return "long"
    path = Path(value)
    if not path.exists():
        return None
    return "dir" if path.is_dir() else "file" if path.is_file() else "other"


def _named(value: str) -> bool:
    return bool(value.strip())


def _parent_is_dir(value: str) -> bool:
    return Path(value).parent.is_dir()


def _line(value: str) -> bool:
    return _named(value) and value.isprintable()


def _accepts_file_out(value: str) -> bool:
    return _named(value) and _kind(value) in (None, "file") and _parent_is_dir(value)


ACCEPTS: dict[type, Callable[[object, str], bool]] = {
    argtypes.Whole: lambda t, v: _whole(t, v),  # type: ignore[arg-type]
    argtypes.Number: lambda t, v: _number(t, v),  # type: ignore[arg-type]
    argtypes.FileIn: lambda t, v: _kind(v) == "file",
    argtypes.DirIn: lambda t, v: _kind(v) == "dir",
    argtypes.PathIn: lambda t, v: _kind(v) in ("dir", "file"),
    argtypes.DirOut: lambda t, v: _named(v) and _kind(v) in (None, "dir"),
    argtypes.FileOut: lambda t, v: _accepts_file_out(v),
    argtypes.FileFollowed: lambda t, v: _named(v) and _kind(v) in (None, "file"),
    argtypes.Line: lambda t, v: _line(v),
}

# Checked(parse): what each parse function accepts, by its name.
THEME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
CHECKED_ACCEPTS: dict[str, Callable[[str], bool]] = {
    "_partition": lambda v: bool(re.fullmatch(r"\s*\d+\s*/\s*\d+\s*", v))
    and 0 <= int(v.split("/")[0]) < int(v.split("/")[1]),
    "key_json": lambda v: False,  # no hostile value is KEY=<JSON or plain text>
    "sampling_param": lambda v: False,  # key_json's values, a known key's type checked
    "model_config_dir": lambda v: False,  # a directory with config.json: none is
    "bind_host": lambda v: False,  # an address of this machine: none is ("0" neither)
    "_boundary": lambda v: False,
    "_top_k": lambda v: (n := _int_text(v)) is not None and (n == -1 or 1 <= n < 2**31),
    "theme_name": lambda v: bool(THEME.fullmatch(v)),
    "_flag": lambda v: False,
    "_finishes": lambda v: False,
    "_model_dir": lambda v: _kind(v) == "dir",
    "_phase_factor": lambda v: False,
    "shard_option": lambda v: CHECKED_ACCEPTS["_partition"](v),  # auto needs a scheduler
    "slurm_job_id": lambda v: v.strip().isdigit(),
}


def accepts(action: argparse.Action, value: str) -> bool:
    """Whether ``value`` is a legitimate value of ``action`` (then it is not fuzzed)."""
    if action.choices is not None:
        return value in action.choices
    kind = action.type
    if kind is None:
        raise AssertionError("untyped option: give it a checked type or list it in EXEMPT")
    if kind is cli_main_server_url():
        return False  # none of HOSTILE is an http(s) base URL
    if isinstance(kind, argtypes.Checked):
        name = kind.__name__
        assert name in CHECKED_ACCEPTS, f"add {name} to CHECKED_ACCEPTS"
        return CHECKED_ACCEPTS[name](value)
    rule = ACCEPTS.get(type(kind))
    if rule is None:
        raise AssertionError(f"option type {kind!r} is not known to the fuzz test: use a "
                             "core.argtypes type (or add its rule here)")
    return rule(kind, value)


def cli_main_server_url() -> object:
    from eagle_tui.tui.options import server_url

    return server_url


def _subparser(parser: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser:
    for action in parser._actions:  # argparse has no public list of its sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            chosen: argparse.ArgumentParser = action.choices[verb]
            return chosen
    raise AssertionError("no sub-commands")


def option_cases() -> Iterator[Case]:
    """Every option (and positional) of the dashboard and of every verb."""
    skip = (argparse._HelpAction, argparse._SubParsersAction)
    top = cli_main.build_parser([])
    for action in top._actions:
        if not isinstance(action, skip):
            yield Case(None, action)
    for verb in cli_main.VERBS:
        for action in _subparser(cli_main.build_parser([verb]), verb)._actions:
            if not isinstance(action, skip):
                yield Case(verb, action)


CASES = list(option_cases())


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty work directory, every state and config dir inside ``tmp_path``, a directory
    and a FIFO to pass; the verbs' ``run`` replaced by a failure."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (tmp_path / "a-dir").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    monkeypatch.chdir(work)
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                 "XDG_RUNTIME_DIR", "EAGLE_TUI_STATE_DIR"):
        monkeypatch.setenv(name, str(home))

    def accepted(args: argparse.Namespace, *rest: object) -> int:
        raise AssertionError(f"a hostile value was accepted: {args}")

    monkeypatch.setattr(dashboard, "run", accepted)
    for verb in cli_main.VERBS:
        module: ModuleType = cli_main._load(verb)
        monkeypatch.setattr(module, "run", accepted)
    return {"dir": str(tmp_path / "a-dir"), "fifo": str(tmp_path / "a-fifo")}


def tree(root: Path) -> set[str]:
    return {str(Path(d, name)) for d, dirs, files in os.walk(root) for name in dirs + files}


def argv_for(case: Case, value: str) -> list[str]:
    verb = [case.verb] if case.verb else []
    if case.action.option_strings:
        return [*verb, f"{case.name}={value}"]  # "=": a value may start with "-"
    return [*verb, "--", value]


def run_case(case: Case, value: str, capsys: pytest.CaptureFixture[str],
             parser: argparse.ArgumentParser | None = None) -> str | None:
    """None when ``value`` was refused as it must be, else what went wrong. Through
    ``main`` itself, or (``parser``) through the parser ``main`` built for this verb: building
    one costs ~50 ms of argparse's gettext look-ups, parsing with it next to nothing."""
    argv = argv_for(case, value)
    try:
        code: object = (cli_main.main(argv) if parser is None
                        else parser.parse_args(argv) and "parsed")
    except SystemExit as exited:
        code = exited.code
    except BaseException as e:  # any escape is the failure being looked for
        return f"raised {type(e).__name__}: {e}"[:300]
    err = capsys.readouterr().err
    if code != 2:
        return f"exit {code!r}, stderr {err[:200]!r}"
    if err.count("\n") != 1 or not err.endswith("\n"):
        return f"not one line: {err[:300]!r}"
    if "Traceback" in err:
        return f"traceback: {err[:200]!r}"
    if re.search(r"\b(the|a|an) (the|a|an)\b", err):  # "give the the log file"
        return f"garbled wording: {err[:200]!r}"
    named = case.name if case.action.option_strings else (case.action.metavar or case.name)
    if str(named) not in err:
        return f"does not name {named}: {err[:200]!r}"
    return None


def hostile_values(case: Case, places: dict[str, str]) -> list[str]:
    if case.action.nargs == 0:
        return ["x"]  # a switch given a value
    values = [v.format(**places) if v in ("{dir}", "{fifo}") else v for v in HOSTILE]
    return [v for v in values if not accepts(case.action, v)]


@pytest.mark.parametrize("case", [c for c in CASES if (c.verb, c.name) not in EXEMPT],
                         ids=lambda c: c.id)
def test_every_option_refuses_hostile_values_in_one_line(
        case: Case, sandbox: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp_path)
    values = hostile_values(case, sandbox)
    parser = cli_main.build_parser([case.verb] if case.verb else [])
    problems = {}
    for number, value in enumerate(values):
        problem = run_case(case, value, capsys, parser if number else None)
        if problem is not None:
            problems[value[:40]] = problem
        assert tree(tmp_path) == before, f"{case.id}={value[:40]!r} created files"
    assert not problems, f"{case.id}: {problems}"
    assert values, f"{case.id}: no hostile value applies; is its type too lax?"


def test_exemptions_name_real_options_and_untyped_options_are_exempt() -> None:
    found = {(c.verb, c.name) for c in CASES}
    assert set(EXEMPT) <= found, set(EXEMPT) - found
    for case in CASES:
        untyped = (case.action.type is None and case.action.choices is None
                   and case.action.nargs != 0)
        if untyped:
            assert (case.verb, case.name) in EXEMPT, f"{case.id} takes any text unchecked"


def fuzz_count() -> int:
    """How many (option, value) cases the fuzz test runs (for the closing note)."""
    places = {"dir": "/tmp", "fifo": "/dev/null"}
    cwd = os.getcwd()
    os.chdir(Path(cwd).anchor)
    try:
        return sum(len(hostile_values(c, places)) for c in CASES
                   if (c.verb, c.name) not in EXEMPT)
    finally:
        os.chdir(cwd)


# One real process per verb: the console script, not main() in-process.
REAL: tuple[tuple[str, ...], ...] = (
    ("--refresh", "nan"), ("demo", "--time-scale", "-1"), ("status", "--log", "/dev/zero"),
    ("sim", "--port", "-1"), ("capture", "--shard", "5/4"), ("batches", "--json=1"),
    ("pause", "x", "--bogus"), ("resume", "x", "--api-key-file", "/dev/zero"),
    ("stop", "x", "--grace", "nan"), ("inspect", "/dev/zero"), ("stats", ".", "--max-length", "-1"),
    ("export", ".", "--format", "parquet", "--out", ""), ("watch", "--expected", "1e400"),
)


@pytest.mark.slow
@pytest.mark.parametrize("argv", REAL, ids=" ".join)
def test_the_installed_command_answers_in_one_line(argv: tuple[str, ...], tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "EAGLE_TUI_STATE_DIR": str(tmp_path / "s"),
           "XDG_CONFIG_HOME": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *argv], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
