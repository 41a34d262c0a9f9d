"""Another local user cannot take a batch over (issue 12).

The takeover found by the adversarial tester: with a world-writable state directory (or
one reached through another user's symlink) a second user replaced a batch record; then
``eagle-tui resume NAME`` sent the real ``Bearer`` key to that user's server and, with
``trust_remote_code`` in the planted record, ran that user's Python.

Here the second user is real: the tests run as root and plant records as ``nobody``
(uid 65534) from a forked child that drops to that uid (``os.setuid``). Where the tests
do not run as root, that is impossible, and ``test_injected_ownership_when_not_root``
checks the same refusals by making our own uid look foreign to ``core.trust`` instead.
Every refusal is checked through the real ``eagle-tui`` CLI, and an "attacker server"
(a listening socket) must see no connection.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from support.records import stored_config
from support.second_user import act_as

from eagle_tui.core import trust
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.errors import UntrustedState

pytestmark = pytest.mark.slow

NOBODY = 65534
SECRET = "sk-second-user-must-not-get-this"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")


def as_nobody(action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child whose uid and gid are nobody's."""
    act_as(NOBODY, NOBODY, action, who="nobody")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory both users can write (sticky, like /tmp), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="eagle-shared-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def attacker() -> Iterator[socket.socket]:
    """The second user's "server": a listening socket that must see no connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    yield server
    server.close()


def planted(out_dir: Path, url: str, batch_id: str = "20250101-000000-evil",
            name: str = "night") -> dict[str, object]:
    """A record as a second user would write it: their server, their code."""
    config = {"prompts": str(out_dir / "p.jsonl"), "out_dir": str(out_dir),
              "servers": [url], "tokenizer": str(out_dir / "tok"), "trust_remote_code": True}
    return {"id": batch_id, "name": name, "out_dir": str(out_dir),
            "socket": str(out_dir / "control.sock"), "log": str(out_dir / "worker.log"),
            "config": config, "created_at": time.time(), "final_state": "stopped",
            "pid": 1, "needs_secrets": True}


def cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state), "EAGLE_TUI_API_KEY": SECRET}
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def no_connection(server: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        server.accept()


def own_batch(state: Path, out_dir: Path) -> BatchRecord:
    record = BatchRecord(id="20250101-000000-mine", name="night", out_dir=str(out_dir),
                         socket=str(out_dir / "control.sock"), log=str(out_dir / "w.log"),
                         config=stored_config(out_dir), created_at=time.time(),
                         final_state="stopped")
    with mock.patch.dict(os.environ, {"EAGLE_TUI_STATE_DIR": str(state)}):
        Registry().save(record)  # as `capture --detach` does: creates the state dir too
    return record


@as_root
def test_a_world_writable_state_dir_is_refused_with_the_fix(
        shared: Path, attacker: socket.socket) -> None:
    state = shared / "state"
    own_batch(state, shared / "out")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700  # created private
    state.chmod(0o777)  # the mistake the tester made: now anyone may write there
    (state / "batches").chmod(0o777)
    url = f"http://127.0.0.1:{attacker.getsockname()[1]}"

    def replace_the_record() -> None:
        for path in (state / "batches").glob("*.json"):
            path.unlink()  # allowed: the directory is world-writable and not sticky
        record = planted(shared / "out", url, batch_id="20250101-000000-mine")
        (state / "batches" / "20250101-000000-mine.json").write_text(json.dumps(record))

    as_nobody(replace_the_record)
    for args in (("resume", "night"), ("batches",), ("batches", "night"), ("stop", "night")):
        result = cli(*args, state=state)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert f"chmod 700 {state}" in result.stderr and "writable by" in result.stderr
    no_connection(attacker)


@as_root
def test_a_record_of_another_user_is_refused_even_in_a_private_dir(
        shared: Path, attacker: socket.socket) -> None:
    state = shared / "state"
    own_batch(state, shared / "mine")
    batches = state / "batches"
    state.chmod(0o777)
    batches.chmod(0o777)  # a window in which a record was planted...
    url = f"http://127.0.0.1:{attacker.getsockname()[1]}"
    evil = batches / "20250101-000000-evil.json"
    as_nobody(lambda: evil.write_text(json.dumps(planted(shared / "theirs", url,
                                                         name="evening"))))
    state.chmod(0o700)  # ...closed again: the directory is fine, the record is not
    batches.chmod(0o700)
    assert evil.stat().st_uid == NOBODY

    result = cli("resume", "evening", state=state)
    assert result.returncode == 2, result.stderr
    assert "belongs to user nobody" in result.stderr and f"rm {evil}" in result.stderr
    listing = cli("batches", state=state)
    assert listing.returncode == 0 and "mine" in listing.stdout
    assert "evening" not in listing.stdout and "skipping batch record" in listing.stderr
    with pytest.raises(UntrustedState, match="belongs to user nobody"):
        Registry(batches).load("20250101-000000-evil")
    no_connection(attacker)


@as_root
def test_a_state_dir_reached_through_another_users_symlink_is_refused(
        shared: Path, attacker: socket.socket) -> None:
    url = f"http://127.0.0.1:{attacker.getsockname()[1]}"
    theirs, link = shared / "theirs", shared / "state-link"

    def make_trap() -> None:
        (theirs / "batches").mkdir(parents=True, mode=0o700)
        record = planted(shared / "out", url)
        (theirs / "batches" / f"{record['id']}.json").write_text(json.dumps(record))
        link.symlink_to(theirs)

    as_nobody(make_trap)
    assert link.lstat().st_uid == NOBODY
    result = cli("resume", "night", state=link)
    assert result.returncode == 2 and "reached through the symlink" in result.stderr
    assert f"rm {link}" in result.stderr

    # A symlink of ours to the other user's directory: refused by the owner of the target.
    mine = shared / "my-link"
    mine.symlink_to(theirs)
    result = cli("resume", "night", state=mine)
    assert result.returncode == 2 and "belongs to user nobody" in result.stderr
    no_connection(attacker)


@as_root
def test_capture_refuses_to_register_into_a_foreign_state_dir(shared: Path) -> None:
    state = shared / "theirs"
    as_nobody(lambda: state.mkdir(mode=0o700))
    assert state.stat().st_uid == NOBODY
    with pytest.raises(UntrustedState, match="belongs to user nobody"):
        Registry(state / "batches").save(BatchRecord(
            id="x", name="x", out_dir="/nonexistent", socket="s", log="l",
            config=stored_config(Path("/nonexistent")), created_at=0.0))


def test_records_and_directories_are_created_private(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "new" / "state"))
    registry = Registry()
    own_batch(tmp_path / "new" / "state", tmp_path / "out")
    for directory in (tmp_path / "new" / "state", registry.root):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for record in registry.root.glob("*.json"):
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert [r.name for r in registry.all()] == ["night"]


def test_injected_ownership_when_not_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          attacker: socket.socket) -> None:
    """The refusals without a second uid: our own uid is made to look foreign."""
    state = tmp_path / "state"
    own_batch(state, tmp_path / "out")
    real = os.geteuid()
    monkeypatch.setattr(trust.os, "geteuid", lambda: real + 4242)
    with pytest.raises(UntrustedState, match="not to you"):
        Registry(state / "batches").all()
    monkeypatch.setattr(trust.os, "geteuid", lambda: real)
    (state / "batches").chmod(0o770)
    with pytest.raises(UntrustedState, match="writable by its group"):
        Registry(state / "batches").find("night")
    (state / "batches").chmod(0o700)
    record = next((state / "batches").glob("*.json"))
    record.chmod(0o666)
    with pytest.raises(UntrustedState, match="chmod 600"):
        Registry(state / "batches").load(record.stem)
    no_connection(attacker)
