"""Values that used to be taken and fail later are refused while the command line is parsed,
in one line, exit 2 (issue 39 item 19): a ``--model-dir`` without ``config.json`` (it was
ignored silently), ``--sampling-param 'temperature="x"'`` (sent, and every row a server
400), ``sim --host 0.0.0.0x`` (the server started, then exited 3)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_e2e_support import ROOT, cli_env
from test_engine_fakes import write_prompts

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL

PORT = 48123  # this helper's range; nothing listens there unless a test starts it


class Listener:
    """A TCP socket on 127.0.0.1 that counts connections (a server nothing should reach)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def capture(tmp_path: Path, *extra: str) -> tuple[int, str, int]:
    """``eagle-tui capture`` as its own process against a listener; (exit, stderr, how many
    connections reached the listener)."""
    prompts = write_prompts(tmp_path / "prompts.jsonl", 3)
    listener = Listener()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain",
             "--prompts", str(prompts), "--out", str(tmp_path / "out"),
             "--server", listener.url, "--tokenizer", str(bundled_tokenizer_path()), *extra],
            cwd=ROOT, env=cli_env({"EAGLE_TUI_STATE_DIR": str(tmp_path / "state")}),
            capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
    return done.returncode, done.stderr, listener.connections


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("config", [None, {"architectures": ["X"]}], ids=["none", "no-vocab"])
def test_a_model_dir_without_a_vocabulary_size_is_refused(
        tmp_path: Path, config: dict[str, object] | None) -> None:
    model = tmp_path / "model"
    model.mkdir()
    if config is not None:
        (model / "config.json").write_text(json.dumps(config))
    code, err, reached = capture(tmp_path, "--model-dir", str(model))
    line = one_line(err)
    assert code == 2 and reached == 0
    assert "argument --model-dir:" in line
    assert ("has no config.json" if config is None else "has no vocab_size") in line
    assert not (tmp_path / "out").exists()


def test_a_model_dir_with_its_config_is_taken(tmp_path: Path) -> None:
    from eagle_tui.core.tokenizer.modelconfig import model_vocab_size

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 163840}}))
    assert model_vocab_size(model) == 163840
    with pytest.raises(ConfigError, match=r"has no config\.json"):
        model_vocab_size(tmp_path)


@pytest.mark.parametrize("param", ['temperature="x"', "top_k=1.5", "stop=[1]",
                                   "ignore_eos=1", "repetition_penalty=NaN",
                                   'stop_token_ids=["2"]'])
def test_a_known_sampling_key_of_the_wrong_type_is_refused_before_sending(
        tmp_path: Path, param: str) -> None:
    code, err, reached = capture(tmp_path, "--sampling-param", param)
    line = one_line(err)
    assert code == 2 and reached == 0
    key = param.split("=")[0]
    assert f"argument --sampling-param: sampling parameter {key} must be " in line
    assert not (tmp_path / "out").exists()


def test_unknown_keys_and_right_types_still_pass(tmp_path: Path) -> None:
    from eagle_tui.tui.cli.capture import sampling_param

    for param, value in (("temperature=0.7", 0.7), ("stop=</s>", "</s>"),
                         ('stop=["a", "b"]', ["a", "b"]), ('logit_bias={"5": -1}', {"5": -1}),
                         ('my_new_key="x"', "x"), ("max_new_tokens=12", 12)):
        assert sampling_param(param) == (param.split("=")[0], value)
    with pytest.raises(ConfigError, match="sampling parameter temperature must be a finite"):
        CaptureConfig(prompts=tmp_path, out_dir=tmp_path, servers=(ServerURL.parse("http://127.0.0.1:1"),),
                      tokenizer=tmp_path, extra_sampling={"temperature": "x"})


@pytest.mark.parametrize("host", ["0.0.0.0x", "8.8.8.8", "1.5", "http://127.0.0.1"])
def test_sim_refuses_a_host_it_cannot_listen_on_while_parsing(host: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "sim", "--host", host,
                           "--port", str(PORT)], cwd=ROOT, env=cli_env(None),
                          capture_output=True, text=True, timeout=120)
    line = one_line(done.stderr)
    assert done.returncode == 2, done.stderr
    assert line.startswith(f"eagle-tui sim: error: argument --host: {host!r} ")
    assert "give an address of this machine" in line
    assert time.monotonic() - started < 60
    assert "Uvicorn" not in done.stdout + done.stderr  # nothing started


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0.0.0.0", "::1"])
def test_sim_takes_the_addresses_of_this_machine(host: str) -> None:
    from eagle_tui.core.sim.args import bind_host

    assert bind_host(host) == host
