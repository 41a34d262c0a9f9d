"""Issue 24 items 6 and 9, as reproduced: a batch whose files are not what they claim to be
(a manifest that is ``/dev/zero``, a FIFO or huge; another user's directory or shard; a
manifest ``extra.partition`` that is not I/N) is refused in one line with exit 2, in bounded
memory and time, by ``stats``, ``inspect`` and ``export``; never a traceback, never a hang.

The memory figures come from ``wait4`` on the real process (``ru_maxrss``), printed for the
closing note and held under the issue's 300 MiB.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from export_helpers import make_row, write_batch

RSS_LIMIT_MIB = 300
TIME = "/usr/bin/time"  # GNU time measures the peak RSS of exactly one process

pytestmark = [pytest.mark.slow,  # real processes
              pytest.mark.skipif(not os.access(TIME, os.X_OK), reason="needs GNU time")]
NOBODY = 65534



@pytest.fixture
def batch(tmp_path: Path) -> Path:
    return write_batch(tmp_path / "b1", [make_row(i) for i in range(50)])


def verb_argv(verb: str, batch: Path, out: Path) -> list[str]:
    if verb == "export":
        return ["export", str(batch), "--format", "parquet", "--out", str(out)]
    return [verb, str(batch)]


def run_measured(argv: list[str], cwd: Path, *, user: int | None = None,
                 timeout: float = 60) -> tuple[int, str, float]:
    """(exit status, stderr, peak RSS in MiB) of ``eagle-tui ARGV`` as a real process.

    The peak is taken by GNU time (``%M``) around the process: ``wait4`` from here would
    report at least this test runner's own size, which a forked child inherits as its
    high-water mark until it execs."""
    err_path, rss_path = cwd / f"stderr-{os.getpid()}.txt", cwd / f"rss-{os.getpid()}.txt"
    command = [sys.executable, "-m", "eagle_tui.tui.cli", *argv]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    command = [TIME, "-f", "%M", "-o", str(rss_path), *command]
    with open(err_path, "wb") as err:
        try:
            done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err,
                                  env={**os.environ, "NO_COLOR": "1"}, timeout=timeout)
        except subprocess.TimeoutExpired as e:  # a hang (a FIFO read) fails here
            raise AssertionError(f"eagle-tui {' '.join(argv)} still running after {timeout}s"
                                 ) from e
    text = err_path.read_text(encoding="utf-8", errors="replace")
    peak_kib = int(rss_path.read_text().split()[-1])
    err_path.unlink()
    rss_path.unlink()
    return done.returncode, text, peak_kib / 1024


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("verb", ["stats", "inspect", "export"])
def test_a_manifest_that_is_dev_zero_is_refused_at_once(batch: Path, tmp_path: Path,
                                                         verb: str) -> None:
    """Item 6: export/stats reached 7.3 GB in 9 s reading it. Since issue 38 a batch
    directory's files are never read through a link: the link itself is refused; a
    device node made in its place (as root can) is refused as a device."""
    manifest = batch / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    code, err, _ = run_measured(verb_argv(verb, batch, tmp_path / "x.parquet"), tmp_path)
    assert code == 2 and "is a symbolic link" in one_line(err)
    assert not (tmp_path / "x.parquet").exists()
    if os.geteuid() == 0:  # a character device of its own: 1,5 is /dev/zero
        manifest.unlink()
        os.mknod(manifest, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        code, err, _ = run_measured(verb_argv(verb, batch, tmp_path / "x.parquet"), tmp_path)
        assert code == 2 and "character device, not a regular file" in one_line(err)
        assert not (tmp_path / "x.parquet").exists()


def test_peak_memory_of_the_dev_zero_reads_stays_small(batch: Path, tmp_path: Path) -> None:
    """Item 6's figures: a manifest on /dev/zero (stats, export) and --api-key-file
    /dev/zero (capture, resume), each measured as its own process."""
    manifest = batch / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    key = tmp_path / "key"
    key.symlink_to("/dev/zero")
    runs = {
        "stats, manifest -> /dev/zero": ["stats", str(batch)],
        "export, manifest -> /dev/zero": verb_argv("export", batch, tmp_path / "x.parquet"),
        "capture --api-key-file -> /dev/zero": [
            "capture", "--prompts", str(prompts), "--out", str(tmp_path / "out"), "--server",
            "http://127.0.0.1:9", "--tokenizer", str(tmp_path), "--api-key-file", str(key)],
        "resume --api-key-file /dev/zero": ["resume", "b", "--api-key-file", "/dev/zero"],
    }
    figures = {}
    for name, argv in runs.items():
        code, err, peak = run_measured(argv, tmp_path)
        assert code == 2, (name, err)
        one_line(err)
        figures[name] = peak
    print("peak RSS (MiB):",
          {k: round(v, 1) for k, v in figures.items()})
    assert max(figures.values()) < RSS_LIMIT_MIB, figures
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("verb", ["stats", "inspect", "export"])
def test_a_manifest_that_is_a_fifo_is_refused_without_waiting(batch: Path, tmp_path: Path,
                                                              verb: str) -> None:
    """Item 6: a FIFO as the manifest hung forever (no writer ever comes)."""
    manifest = batch / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)
    code, err, _ = run_measured(verb_argv(verb, batch, tmp_path / "x.parquet"), tmp_path,
                                timeout=60)
    assert code == 2 and "FIFO" in one_line(err)


def test_a_manifest_larger_than_any_manifest_is_refused(batch: Path, tmp_path: Path) -> None:
    manifest = batch / "manifest.json"
    with open(manifest, "r+b") as handle:  # sparse: 65 MiB that take no disk
        handle.truncate(65 << 20)
    code, err, peak = run_measured(["stats", str(batch)], tmp_path)
    assert code == 2 and "larger than 64 MiB" in one_line(err)
    assert peak < RSS_LIMIT_MIB


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user can enter (pytest's own tmp root is 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="eagle-hostile-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs the verb as another user (nobody) through setpriv, which needs root")


@needs_root
@pytest.mark.parametrize("verb", ["stats", "inspect", "export"])
@pytest.mark.parametrize("locked", ["directory", "shard"])
def test_another_users_batch_is_one_line_not_a_traceback(shared: Path, verb: str,
                                                         locked: str) -> None:
    """Item 9: a 0700 batch directory or a 0600 shard of another user gave PermissionError
    tracebacks. The batch is root's; the verb runs as nobody."""
    batch = write_batch(shared / "b1", [make_row(i) for i in range(50)])
    out_dir = shared / "outs"
    out_dir.mkdir()
    out_dir.chmod(0o777)
    if locked == "directory":
        batch.chmod(0o700)
    else:
        batch.chmod(0o755)
        (batch / "shards").chmod(0o755)
        for shard in (batch / "shards").iterdir():
            shard.chmod(0o600)
    code, err, _ = run_measured(verb_argv(verb, batch, out_dir / "x.parquet"), out_dir,
                                user=NOBODY)
    if verb == "stats" and locked == "shard":
        # stats lists the shards it could not read ("ignored: … Permission denied" on
        # stdout) and counts the rest (none here): exit 0, nothing on stderr
        assert code == 0 and err == ""
        return
    assert code == 2, err
    assert "permission denied" in one_line(err).lower()
    assert not (out_dir / "x.parquet").exists()


@pytest.mark.parametrize("partition", ["abc", "", "1/2/3", "5/2", "-1/2", "0/0"])
@pytest.mark.parametrize("verb", ["stats", "inspect", "export"])
def test_a_manifest_partition_that_is_not_a_slice_is_refused(
        batch: Path, tmp_path: Path, partition: str, verb: str) -> None:
    """Item 9: ``abc``, ``""``, ``1/2/3`` gave ValueError tracebacks; ``5/2`` and ``-1/2``
    were accepted."""
    manifest = batch / "manifest.json"
    data = json.loads(manifest.read_text())
    data.setdefault("extra", {})["partition"] = partition
    manifest.write_text(json.dumps(data))
    code, err, _ = run_measured(verb_argv(verb, batch, tmp_path / "x.parquet"), tmp_path)
    assert code == 2 and "partition" in one_line(err)
    assert not (tmp_path / "x.parquet").exists()
