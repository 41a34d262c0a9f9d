"""``eagle-tui diagnose``: the whole evidence bundle of a real process tree, as text and JSON,
with credentials redacted; bad options are one line and exit 2."""

from __future__ import annotations

import json

import pytest

from eagle_tui.tui.cli.main import main

pytestmark = pytest.mark.slow

SECRET = "sk-diagnose-7f3a"
QUICK = ("--time-scale", "0.05", "--tp-size", "2", "--health-latency", "0")


def test_a_hung_rank_in_text_and_json_without_the_key(
    start_sim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, "--rank-hang", "fifo", "--api-key", SECRET, wait=None)
    sim.wait_for_line("Load weight begin", timeout=60)
    target = ("--pid", str(sim.pid), "--log", str(sim.log_path))
    assert main(["diagnose", *target]) == 0
    text = capsys.readouterr().out
    for section in ("== server", "== last log lines", "== processes", "== stacks (py-spy)",
                    "== GPUs", "== leftover processes of earlier runs", "== server arguments"):
        assert section in text
    assert "the processes say: blocked on I/O" in text
    assert "openat(" in text and "model.safetensors" in text
    assert f"launcher (PID {sim.pid})" in text and "TP0 (PID " in text
    assert "TP0 in " in text  # its stack
    assert "--api-key <redacted>" in text and SECRET not in text
    assert "tp_size = 2" in text
    assert main(["diagnose", *target, "--json", "--no-stacks"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pid"] == sim.pid and data["cause"]["cause"] == "blocked_on_io"
    assert data["stacks"] == [] and any("TP0 (PID" in p for p in data["processes"])
    assert data["server_args"]["tp_size"] == "2"
    assert SECRET not in json.dumps(data)


@pytest.mark.parametrize(("args", "says"), [
    (("--pid", "abc"), "argument --pid: 'abc' is not a whole number"),
    (("--pid", "0"), "argument --pid: '0' is out of range"),
    (("--url", "http://h:1/?token=x"), "has a query string"),
    (("--log", "/nonexistent/server.log"),
     "argument --log: '/nonexistent/server.log' does not exist; give the server's log file"),
])
def test_bad_options_are_one_line_and_exit_2(
    args: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["diagnose", *args])
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and says in err[-1] and "Traceback" not in "\n".join(err)
    assert "token=x" not in "\n".join(err)


def test_the_verb_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "diagnose" in capsys.readouterr().out
