"""Issue 38 item 5: ``capture --out`` writes only into a directory of ours, and only files
of its own there.

As the issue found it: root ran ``capture --out`` into a directory another user could
write, and followed the links that user had planted: a root-only file was truncated
through ``.eagle-tui.lock``, replaced through ``manifest.json.tmp``, appended to through
``capture.log`` and ``rejects.jsonl``. Here the other user is real (``second_user``), the
capture is the real ``eagle-tui capture`` process against a real simulated server, and
each link's target is a root-only 0600 file whose bytes and mtime must not change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.second_user import LocalUser
from test_engine_fakes import write_prompts

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

PLANTED = (".eagle-tui.lock", "manifest.json.tmp", "capture.log", "rejects.jsonl",
           "failures.jsonl", "manifest.json")
"""Names a capture opens, truncates, appends to or replaces in its batch directory."""


@pytest.fixture
def targets(tmp_path: Path) -> dict[str, Path]:
    """A root-only 0600 file per planted name, in a 0700 directory of root's."""
    secrets = tmp_path / "root-only"
    secrets.mkdir(mode=0o700)
    files = {}
    for index, name in enumerate((*PLANTED, "worker.log", "part.tmp")):
        target = secrets / f"target-{index}"
        target.write_text(f"ROOT-ONLY {name}\n")
        target.chmod(0o600)
        os.utime(target, (1_000_000_000, 1_000_000_000))  # an mtime any write would change
        files[name] = target
    return files


def state_of(paths: dict[str, Path]) -> dict[str, tuple[bytes, int, int]]:
    """Each target's bytes, mtime and mode: what a write through a link would change."""
    return {name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_mode)
            for name, p in paths.items()}


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    return write_prompts(tmp_path / "prompts.jsonl", 12, bad_every=5)


def capture(out: Path, server: SimProcess, prompts: Path, state: Path,
            *extra: str) -> subprocess.CompletedProcess[str]:
    """``eagle-tui capture`` as a real process (as root: the user the issue's capture ran as)."""
    argv = [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--prompts", str(prompts),
            "--out", str(out), "--server", server.url, "--tokenizer",
            str(bundled_tokenizer_path()), "--max-new-tokens", "8", "--display", "plain",
            "--shard-rows", "4", *extra]
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state), "NO_COLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture
def theirs(second_user: LocalUser) -> Iterator[Path]:
    """A directory of the second user's, as their umask leaves it (0755)."""
    directory = second_user.home / "out"
    second_user.act(lambda: directory.mkdir(mode=0o755))
    yield directory


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detach"])
def test_planted_links_in_another_users_out_are_refused_untouched(
        second_user: LocalUser, theirs: Path, targets: dict[str, Path], prompts: Path,
        sim_server: SimProcess, tmp_path: Path, detach: bool) -> None:
    def plant() -> None:
        for name in (*PLANTED, "worker.log"):
            (theirs / name).symlink_to(targets[name])

    second_user.act(plant)
    before = state_of(targets)
    done = capture(theirs, sim_server, prompts, tmp_path / "state",
                   *(("--detach",) if detach else ()))
    print(done.stderr.strip())
    assert done.returncode == 2, done.stderr
    assert f"belongs to user {second_user.name}" in one_line(done.stderr)
    assert "pass it as --out" in done.stderr
    assert state_of(targets) == before
    assert sorted(p.name for p in theirs.iterdir()) == sorted((*PLANTED, "worker.log"))


def test_an_out_that_others_can_write_is_refused(
        second_user: LocalUser, targets: dict[str, Path], prompts: Path,
        sim_server: SimProcess, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Ours, but 0777 (as a shared scratch directory often is): the other user planted."""
    shared = Path(tempfile.mkdtemp(prefix="eagle-out-"))  # /tmp: the other user can enter
    shared.chmod(0o777)
    request.addfinalizer(lambda: shutil.rmtree(shared))
    second_user.act(lambda: (shared / ".eagle-tui.lock").symlink_to(targets[".eagle-tui.lock"]))
    before = state_of(targets)
    done = capture(shared, sim_server, prompts, tmp_path / "state")
    print(done.stderr.strip())
    assert done.returncode == 2
    assert "writable by its group and everyone" in one_line(done.stderr)
    assert f"chmod 700 {shared}" in done.stderr
    assert state_of(targets) == before


@pytest.mark.parametrize("name", [*PLANTED, "shards/part-00000.parquet.tmp", "worker.log"])
def test_links_in_a_directory_of_ours_are_never_followed(
        name: str, targets: dict[str, Path], prompts: Path, sim_server: SimProcess,
        tmp_path: Path) -> None:
    """The same links, left in a batch directory of our own: each file is opened with
    O_NOFOLLOW (temporary ones O_EXCL), so the capture refuses and the target stays."""
    out = tmp_path / "mine"
    (out / "shards").mkdir(parents=True)
    target = targets["part.tmp" if name.startswith("shards/") else name]
    (out / name).symlink_to(target)
    before = state_of(targets)
    done = capture(out, sim_server, prompts, tmp_path / "state",
                   *(("--detach",) if name == "worker.log" else ()))
    print(name, done.returncode, done.stderr.strip().splitlines()[-1:])
    assert "Traceback" not in done.stderr
    if name.startswith("shards/"):  # a name on disk is never reused: the next index is
        assert done.returncode == 1 and (out / "shards" / "part-00001.parquet").is_file()
    else:
        assert done.returncode == 2, done.stderr
        assert "symbolic link" in one_line(done.stderr)
    assert state_of(targets) == before
    assert (out / name).is_symlink()  # left for the user to look at, not replaced


def test_a_capture_into_a_fresh_directory_of_ours_still_works(
        prompts: Path, sim_server: SimProcess, tmp_path: Path) -> None:
    """The rules cost nothing to an ordinary run: missing levels are made 0755 (never
    group-writable, whatever the umask) and the batch completes."""
    old = os.umask(0o002)
    try:
        done = capture(tmp_path / "new" / "deeper" / "out", sim_server, prompts,
                       tmp_path / "state")
    finally:
        os.umask(old)
    assert done.returncode == 1, done.stderr  # the malformed prompt lines are rejects
    for level in (tmp_path / "new", tmp_path / "new" / "deeper", tmp_path / "new/deeper/out"):
        assert level.stat().st_mode & 0o777 == 0o755
    out = tmp_path / "new" / "deeper" / "out"
    assert (out / "manifest.json").is_file() and (out / "rejects.jsonl").is_file()
    assert list((out / "shards").glob("*.parquet"))
