"""Text from others is made clean where eagle-tui builds it (``core.outside``): credentials
redacted, control and escape characters shown, never run. The redaction table (every form
a credential takes in a command line, a log line, a JSON or Python dict, an environment;
SGLang's own ``#token`` counters kept), then real processes (ours, and a real second local
user's) that hold the watched port with an ``--api-key`` in their command line and escape
sequences in their title: ``watch``'s text and JSON carry neither."""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.second_user import LocalUser
from support.waiting import async_wait_until

from eagle_tui.core.outside import clean, command_line, quote
from eagle_tui.core.urls import is_secret_name, redact
from eagle_tui.tui.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures"

REDACTED_FORMS = [
    ("python -m sglang.launch_server --model-path /m --api-key sk-1 --port 30000",
     "python -m sglang.launch_server --model-path /m --api-key <redacted> --port 30000"),
    ("--api-key=sk-1 --host 0.0.0.0", "--api-key=<redacted> --host 0.0.0.0"),
    ("--enable-metrics --api-key sk-1", "--enable-metrics --api-key <redacted>"),
    ('--api-key "two words" --port 1', '--api-key "<redacted>" --port 1'),
    ("--api-key 'two words'", "--api-key '<redacted>'"),
    ("--hf-token hf_abc --admin-api-key adm", "--hf-token <redacted> --admin-api-key <redacted>"),
    ('{"api_key": "sk-1", "model": "m"}', '{"api_key": "<redacted>", "model": "m"}'),
    ("{'api_key': 'sk-1', 'port': 30000}", "{'api_key': '<redacted>', 'port': 30000}"),
    ("api_key = 'sk-1'", "api_key = '<redacted>'"),
    ('"api_key" : "two words"', '"api_key" : "<redacted>"'),
    ("ServerArgs(model_path='/m', api_key='sk-1', admin_api_key=None)",
     "ServerArgs(model_path='/m', api_key='<redacted>', admin_api_key=None)"),
    ('curl -H "Authorization: Bearer sk-1" http://h:30000/v1/models',
     'curl -H "Authorization: Bearer <redacted>" http://h:30000/v1/models'),
    ("Authorization: Basic dXNlcjpwdw==", "Authorization: Basic <redacted>"),
    ("request failed, sent Bearer sk-1", "request failed, sent Bearer <redacted>"),
    ("OPENAI_API_KEY=sk-1 python serve.py", "OPENAI_API_KEY=<redacted> python serve.py"),
    ("HF_TOKEN=hf_abc GITHUB_TOKEN=gh_1", "HF_TOKEN=<redacted> GITHUB_TOKEN=<redacted>"),
    ("MY_SECRET=s3", "MY_SECRET=<redacted>"),
    ("AWS_ACCESS_KEY_ID=AKIA1 AWS_SECRET_ACCESS_KEY=wJal/K7",
     "AWS_ACCESS_KEY_ID=<redacted> AWS_SECRET_ACCESS_KEY=<redacted>"),
    ("password: hunter2", "password: <redacted>"),
    ("error: token=t0k", "error: token=<redacted>"),
    ("dist init at alice:pw@10.0.0.5:5000 failed", "dist init at <redacted>@10.0.0.5:5000 failed"),
    ("GET http://alice:pw@h:30000/health?token=t0k", "GET http://h:30000/health"),
    ('--api-key "cut off by a cli', "--api-key <redacted>"),
]


@pytest.mark.parametrize(("text", "shown"), REDACTED_FORMS)
def test_every_form_of_a_credential_is_redacted(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown  # once is enough: cleaning twice changes nothing


def _first_line(path: Path, marker: str) -> str:
    return next(line for line in path.read_text().splitlines() if marker in line)


SGLANG_LINES = [
    _first_line(FIXTURES / "serverlogs/02-deepseek-r1-2node-h800-ready.log", "Prefill batch"),
    _first_line(FIXTURES / "serverlogs/02-deepseek-r1-2node-h800-ready.log", "Decode batch"),
    _first_line(FIXTURES / "realsglang-spec/decode_log.txt", "Decode batch"),
    _first_line(FIXTURES / "realsrv/server_startup.log", "KV Cache is allocated"),
    _first_line(FIXTURES / "realsrv/server_startup.log", "max_total_num_tokens="),
    "git@github.com:org/repo.git alice@example.com max_new_tokens=8 tokenizer_path=/t",
]


@pytest.mark.parametrize("line", SGLANG_LINES)
def test_sglang_counters_and_plain_text_are_kept(line: str) -> None:
    assert redact(line) == line


def test_the_counters_a_hang_report_needs_stay_readable() -> None:
    prefill, decode = SGLANG_LINES[0], SGLANG_LINES[1]
    assert "#new-token: 7, #cached-token: 0" in clean(prefill)
    assert re.search(r"#token: \d+", clean(decode))


@pytest.mark.parametrize(("name", "secret"), [
    ("api_key", True), ("--api-key", True), ("OPENAI_API_KEY", True), ("apiKey", True),
    ("HF_TOKEN", True), ("--hf-token", True), ("accessToken", True), ("client_secret", True),
    ("AWS_ACCESS_KEY_ID", True), ("AWS_SECRET_ACCESS_KEY", True), ("Authorization", True),
    ("ssl_keyfile_password", True), ("watermark_key", True),
    ("max_new_tokens", False), ("tokenizer_path", False), ("token_usage", False),
    ("ssl_keyfile", False), ("max_total_num_tokens", False), ("model_path", False),
])
def test_credential_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_a_title_is_shown_never_run_and_a_command_line_keeps_its_words() -> None:
    argv = ["\x1b]0;pwned\x07\x1b[2J", "-m", "srv", "--api-key", "two words", "--port", "1"]
    assert command_line(argv) == "'␛]0;pwned␇␛[2J' -m srv --api-key '<redacted>' --port 1"
    assert clean("a\x9b31mb\u202ec") == "a\\x9b31mb<U+202E>c"
    assert quote("x" * 150 + " --api-key sk-1", 160).count("sk-1") == 0


# -- real processes on the watched port --------------------------------------------------

SECRET, SECRET2 = "SEKRIT-4f1d", "SEKRIT-9c2e"
TITLE = "\x1b]0;pwned\x07\x1b[2J"
HOLDER = """\
import socket, time
with open("/proc/self/comm", "w") as comm:
    comm.write("\\x1b]2;own\\x07\\x1b[2J")
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
print(sock.getsockname()[1], flush=True)
time.sleep(120)
"""
ARGV = [TITLE, "-m", "holder", "--api-key", SECRET, "--hf-token", f"two {SECRET2}"]
PYTHON = "/usr/bin/python3"  # another user cannot run the test's interpreter under /root
FAST = ("--interval", "0.05", "--health-timeout", "0.5", "--no-history")
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(params=["ours", "another user's"])
def holder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """(PID, port) of a process that holds a port with a secret in its command line and
    escape sequences in its title and name: our own, or a real second user's."""
    if not Path(PYTHON).exists():
        pytest.skip(f"{PYTHON} is not installed")
    if request.param == "ours":
        (tmp_path / "holder.py").write_text(HOLDER)
        process = subprocess.Popen(ARGV, executable=PYTHON, cwd=tmp_path,
                                   stdout=subprocess.PIPE, text=True)
    else:
        user: LocalUser = request.getfixturevalue("second_user")
        (user.home / "holder.py").write_text(HOLDER)
        process = user.popen(ARGV, executable=PYTHON, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.pid, int(process.stdout.readline())
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _server_log(tmp_path: Path, port: int) -> Path:
    """A start-up's log with a key in its arguments and an escape sequence in its last line."""
    log = tmp_path / "server.log"
    log.write_text(
        f"server_args=ServerArgs(model_path='/m', port={port}, api_key='{SECRET}')\n"
        f"Load weight begin. avail mem=10.00 GB \x1b]0;log-pwned\x07 HF_TOKEN={SECRET2}\n")
    return log


def _watch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["watch", *FAST, *args])
    return code, capsys.readouterr().out


def _assert_clean(out: str, *, as_json: bool) -> None:
    texts = [out]
    if as_json:
        texts += [json.dumps(json.loads(line), ensure_ascii=False) for line in out.splitlines()]
        texts += [v for line in out.splitlines() for v in _strings(json.loads(line))]
    for text in texts:
        assert SECRET not in text and SECRET2 not in text, text
        assert CONTROL.search(text.replace("\n", "")) is None, repr(text)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_launch_refused_names_the_holder_cleanly(
    holder: tuple[int, int], as_json: bool, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    pid, port = holder
    code, out = _watch(capsys, "--url", f"http://127.0.0.1:{port}", "--log",
                       str(tmp_path / "new.log"), "--port-grace", "0",
                       *(("--json",) if as_json else ()), "--launch", "--", "true")
    assert code == 5
    _assert_clean(out, as_json=as_json)
    said = json.loads(out.splitlines()[-1])["diagnosis"] if as_json else out
    assert f"PID {pid} ('␛]0;pwned␇␛[2J' -m holder --api-key <redacted> --hf-token " in said


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_port_conflict_flag_quotes_the_holder_and_the_log_cleanly(
    holder: tuple[int, int], as_json: bool, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    pid, port = holder
    log = _server_log(tmp_path, port)
    # the server we watch holds no port; its title and command line are as hostile
    server = subprocess.Popen([TITLE, "-c", "import time; time.sleep(60)", "--api-key", SECRET],
                              executable=PYTHON)
    try:
        code, out = _watch(capsys, "--url", f"http://127.0.0.1:{port}", "--log", str(log),
                           "--pid", str(server.pid), "--timeout", "3",
                           *(("--json",) if as_json else ()))
    finally:
        server.kill()
        server.wait()
    assert code == 6  # the port conflict's verdict waits for its grace; the flag is news now
    _assert_clean(out, as_json=as_json)
    lines = out.splitlines()
    if as_json:
        flag = next(e for e in map(json.loads, lines) if e.get("flag") == "port_conflict")
        said = f"{flag['evidence']} | next: {flag['next_step']}"
        last = json.loads(lines[-1])["diagnosis"]
    else:
        said, last = next(line for line in lines if "flag port_conflict" in line), lines[-1]
    assert f"held by PID {pid} ('␛]0;pwned␇␛[2J' -m holder --api-key <redacted>" in said
    assert "HF_TOKEN=<redacted>'" in last and "␛]0;log-pwned␇" in last
    if as_json:
        processes = json.loads(lines[-1])["processes"]
        assert processes[0].startswith(f"launcher (PID {server.pid}) ")


@pytest.mark.slow
async def test_the_dashboard_shows_the_holder_and_the_log_cleanly(
    holder: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eagle_tui.tui.app import EagleApp
    from eagle_tui.tui.cli.main import build_parser
    from eagle_tui.tui.dashboard import TuiConfig, options_from
    from eagle_tui.tui.widgets.server_card import ServerCard

    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    pid, port = holder
    server = subprocess.Popen(["sleep", "60"])
    argv = ["--url", f"http://127.0.0.1:{port}", "--log", str(_server_log(tmp_path, port)),
            "--pid", str(server.pid)]
    try:
        app = EagleApp(options_from(build_parser(argv).parse_args(argv), TuiConfig(), {}))
        async with app.run_test(size=(220, 60)) as pilot:
            card = app.screen.query_one(ServerCard)
            await async_wait_until(lambda: card.snapshot is not None
                                   and card.snapshot.flag("port_conflict") is not None,
                                   60, "the port conflict")
            await pilot.pause()
            screen = _screen_text(app.export_screenshot())
    finally:
        server.kill()
        server.wait()
    assert SECRET not in screen and CONTROL.search(screen.replace("\n", "")) is None
    ours = [line for line in screen.splitlines() if "held by" in line or "last log" in line]
    assert len(ours) >= 3  # the flag, the card's process line, the card's last log line
    assert SECRET2 not in screen  # nor in the log pane: a log is another user's text too
    held = f"held by PID {pid} ('␛]0;pwned␇␛[2J' -m holder --api-key <redacted> --hf-token "
    assert sum(held in line for line in ours) == 2
    assert any("last log" in line and "␛]0;log-pwned␇ HF_TOKEN=<redacted>" in line
               for line in ours)


def _screen_text(svg: str) -> str:
    """The text of a screenshot, one line per row."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")
