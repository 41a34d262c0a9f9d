"""One logging setup (core/logsetup.py) for every process: the demo's keeper and a process
logging to stderr (the detached worker) write the one format, quiet the chatty libraries and
route warnings into logging; a foreground capture's log file and stderr split as before."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eagle_tui.core.logsetup import log_to_batch, remove_handlers

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"


def line(name: str, message: str) -> str:
    """The one format, as a pattern: ``<stamp> LEVEL logger.name: message``."""
    return rf"{STAMP} (INFO|WARNING) {re.escape(name)}: {message}"


def gone_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_the_demo_keeper_logs_in_the_one_format(tmp_path: Path) -> None:
    run, log = tmp_path / "demo" / "run-1", tmp_path / "keeper.log"
    run.mkdir(parents=True)
    with log.open("w") as err:
        keeper = subprocess.run(
            [sys.executable, "-m", "eagle_tui.tui.demokeeper", "--run", str(run),
             "--owner", str(gone_pid()), "--registry", str(tmp_path / "batches")],
            input="quit\n", stdout=subprocess.PIPE, stderr=err, text=True, timeout=60)
    assert keeper.returncode == 0 and keeper.stdout.strip() == "clean"
    lines = log.read_text().splitlines()
    pattern = line("eagle_tui.tui.demokeeper", r".*stopped \d+ processes \(quit\)")
    assert any(re.fullmatch(pattern, text) for text in lines), lines


def test_a_process_logging_to_stderr_quiets_libraries_and_logs_warnings() -> None:
    script = ("import logging, warnings\n"
              "from eagle_tui.core.logsetup import log_to_stderr\n"
              "log_to_stderr()\n"
              "logging.getLogger('eagle_tui.core.batches.worker').info('one row saved')\n"
              "logging.getLogger('httpx').info('HTTP Request: GET /health')\n"
              "warnings.warn('a library warns')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    lines = done.stderr.splitlines()
    assert re.fullmatch(line("eagle_tui.core.batches.worker", "one row saved"), lines[0]), lines
    assert "HTTP Request" not in done.stderr
    assert re.fullmatch(line("py.warnings", ".*a library warns"), lines[1]), lines


def test_a_capture_logs_everything_to_its_file_and_one_line_warnings_to_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "out" / "capture.log"
    handlers = log_to_batch(path)
    try:
        log = logging.getLogger("eagle_tui.core.capture.test")
        log.info("row 1 saved")
        try:
            raise RuntimeError("server said \x1b[31mno")
        except RuntimeError:
            log.warning("a request failed", exc_info=True)
    finally:
        remove_handlers(handlers)
        logging.captureWarnings(False)
    err = capsys.readouterr().err
    assert err.splitlines() == ["WARNING: a request failed (traceback in capture.log)"]
    text = path.read_text()
    assert "row 1 saved" in text and "Traceback" in text and "RuntimeError" in text
