"""Server URLs: one value (``core.urls.ServerURL``), parsed once, and every option that takes a
URL refuses a bad one the same way: argparse's one-line error naming the option, exit 2, no
traceback, and never the query string or the user info it may carry."""

from __future__ import annotations

import copy
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from eagle_tui.core.errors import BadURL, ConfigError
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL, shown, url_error
from eagle_tui.core.wire import ENCODER, decoder
from eagle_tui.tui.cli.main import main
from eagle_tui.tui.sources.capture import BatchRequest

SECRET = "sekrit-7f3"

# (URL, what the refusal says): the URLs `capture --server` refused before the value existed,
# and those that gave `watch --url` a traceback.
BAD_URLS = [
    (f"http://h:30000/?token={SECRET}", "query string"),
    (f"http://h:30000#{SECRET}", "fragment"),
    ("http://h :30000", "spaces or control"),
    ("http://127.0.0.1:99999", "not a valid URL"),
    ("http://[::1", "not a valid URL"),
    ("http://h:0", "port 0"),
    ("ftp://h", "not an http(s) URL"),
    ("localhost:30000", "not an http(s) URL"),
    ("http://", "names no host"),
]

# Every option that takes a server URL, with what else its verb needs to get that far.
PROMPTS = "prompts.jsonl"
URL_OPTIONS: dict[str, tuple[str, ...]] = {
    "watch --url": ("watch", "--url"),
    "diagnose --url": ("diagnose", "--url"),
    "status --url": ("status", "--url"),
    "status --router-metrics": ("status", "--router-metrics"),
    "capture --server": ("capture", "--prompts", PROMPTS, "--out", "out", "--tokenizer",
                         str(bundled_tokenizer_path()), "--server"),
    "resume --server": ("resume", "some-batch", "--server"),
    "dashboard --url": ("--url",),
}


@pytest.mark.parametrize(("text", "part"), BAD_URLS)
def test_a_bad_url_is_no_value(text: str, part: str) -> None:
    with pytest.raises(BadURL) as refused:
        ServerURL.parse(text)
    assert part in str(refused.value) and SECRET not in str(refused.value)
    problem = url_error(text)  # the same check, as CaptureConfig words it
    assert problem is not None and part in problem and SECRET not in problem


def test_the_forms_of_a_url() -> None:
    url = ServerURL.parse(f"HTTP://eve:{SECRET}@Example.org:8080/proxy/")
    assert url.public == "http://example.org:8080/proxy"
    assert url.for_requests == f"http://eve:{SECRET}@example.org:8080/proxy"
    assert url.shown == "'http://example.org:8080/proxy'"
    assert url.label == "example.org:8080/proxy"
    assert url.effective_port == 8080
    for form in (url.public, url.shown, url.label, str(url), repr(url), f"{url}"):
        assert SECRET not in form and "eve" not in form
    # The credential is not part of the value's identity: the same server either way.
    assert url == ServerURL.parse("http://example.org:8080/proxy")
    assert len({url, ServerURL.parse("http://example.org:8080/proxy/")}) == 1


def test_ipv6_ports_and_defaults() -> None:
    url = ServerURL.parse("http://[::1]:30000/")
    assert (url.host, url.port, url.public, url.label) == ("::1", 30000, "http://[::1]:30000",
                                                           "[::1]:30000")
    assert ServerURL.parse("https://h").effective_port == 443
    assert ServerURL.parse("http://h").effective_port == 80
    assert ServerURL.parse("http://h").label == "h"
    assert ServerURL.parse("http://h").for_requests == "http://h"


def test_user_info_is_refused_together_with_a_key() -> None:
    assert ServerURL.parse("http://u:pw@h:30000").public == "http://h:30000"
    with pytest.raises(BadURL, match="Basic auth") as refused:
        ServerURL.parse("http://u:pw@h:30000", has_key=True)
    assert "pw" not in str(refused.value)


def test_a_document_holds_the_public_text_of_a_url() -> None:
    url = ServerURL.parse(f"http://user:{SECRET}@host:30000/v1/")
    assert ENCODER.encode([url]) == b'["http://host:30000/v1"]'
    assert SECRET not in repr(url) and url.for_requests == f"http://user:{SECRET}@host:30000/v1"
    back = decoder(list[ServerURL]).decode(b'["http://host:30000/v1"]')
    assert back == [url] and back[0].userinfo == "" and url.without_userinfo.userinfo == ""
    assert isinstance(BadURL("x"), ConfigError)  # one tree (core.errors)
    assert shown("http://h:99999") == "(an unparsable URL)"  # never echoed
    assert copy.deepcopy(url).for_requests == url.for_requests  # a value like any other


def test_the_new_batch_form_refuses_a_bad_url_naming_it(tmp_path: Path) -> None:
    request = BatchRequest(tmp_path / "p.jsonl", tmp_path / "out",
                           ("http://h:1", f"http://u:{SECRET}@h:2/?key={SECRET}"), tmp_path)
    with pytest.raises(ConfigError, match="--server 'http://h:2/': has a query string") as bad:
        request.to_config()
    assert SECRET not in str(bad.value)
    config = replace(request, servers=("http://h:1/",)).to_config()
    assert config.servers == (ServerURL.parse("http://h:1"),)


@pytest.mark.parametrize("option", URL_OPTIONS)
@pytest.mark.parametrize(("text", "part"), BAD_URLS)
def test_every_url_option_refuses_a_bad_url_in_one_line(
    option: str, text: str, part: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / PROMPTS).write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(SystemExit) as exited:
        main([*URL_OPTIONS[option], text])
    said = capsys.readouterr()
    assert exited.value.code == 2 and said.out == ""
    error = said.err.strip().splitlines()[-1]
    flag = URL_OPTIONS[option][-1]
    assert f": error: argument {flag}: " in error and part in error, said.err
    assert SECRET not in said.err
    assert not (tmp_path / "out").exists()  # capture refused before making anything


@pytest.mark.slow  # starts processes
def test_the_installed_command_refuses_without_a_traceback() -> None:
    """What a user types: the process exits 2 with one error line (it was a traceback)."""
    for text in ("http://127.0.0.1:99999", "http://[::1", f"http://h:9/?token={SECRET}"):
        done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "watch", "--url", text],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.splitlines()[-1].startswith("eagle-tui watch: error: argument --url: ")
        assert SECRET not in done.stderr + done.stdout
