"""Export attacked (issue 24 items 1, 2, 8, 13, 14): an ``--out`` inside a source batch or on
a device/FIFO, a full disk at every fill level, shards whose ids and lengths another tool
wrote, and a sample id carrying terminal escapes. Each answers one line and exit 2 (or drops
the bad rows with their reason), and neither the sources nor an earlier export change."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from export_helpers import make_row, read_jsonl, write_batch
from support.diskfull import DiskBudget, inject_full_disk

from eagle_tui.core import fsio
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.tui.cli.main import main

ROWS = 50


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    return write_batch(tmp_path / "b1", [make_row(i) for i in range(ROWS)], max_rows=25)


def _tree(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with its sha256: what must not change."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _export(capsys: pytest.CaptureFixture[str], batch: Path, out: Path, *extra: str,
            fmt: str = "parquet") -> tuple[int, str]:
    try:
        code = main(["export", str(batch), "--format", fmt, "--out", str(out), *extra])
    except SystemExit as e:  # refused by the option's own type: argparse's exit
        code = int(e.code or 0)
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- item 1: --out inside a source batch ----------------------------------------------------

def test_force_never_overwrites_a_source_shard_or_manifest(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(batch)
    shard = batch / "shards" / Manifest.load(batch).shards[0].name
    alias = tmp_path / "alias.parquet"
    alias.symlink_to(shard)
    for out in (shard, batch / "manifest.json", batch / "train.jsonl", alias):
        fmt = "parquet" if out.suffix == ".parquet" else "specforge"  # the name's own format
        code, err = _export(capsys, batch, out, "--force", fmt=fmt)
        assert code == 2
        assert "is inside the batch directory" in _one_line(err)
    assert _tree(batch) == before
    code, _ = _export(capsys, batch, tmp_path / "ok.parquet")
    assert code == 0 and pq.read_table(tmp_path / "ok.parquet").num_rows > 0


# -- item 2: a device or FIFO as --out ------------------------------------------------------

def _nodes(tmp_path: Path) -> Iterator[Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    yield fifo
    to_null = tmp_path / "to-null"
    to_null.symlink_to("/dev/null")
    yield to_null
    device = tmp_path / "null-device"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        return  # no CAP_MKNOD here: the symlink to /dev/null stands for a device
    yield device


def test_force_never_replaces_a_device_or_fifo(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for node in _nodes(tmp_path):
        kind = os.stat(node).st_mode
        code, err = _export(capsys, batch, node, "--force", fmt="specforge")
        assert code == 2 and "not a regular file" in _one_line(err)
        assert os.stat(node).st_mode == kind, node  # still the FIFO / device it was
        assert not stat.S_ISREG(os.stat(node).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_stale_temp_symlink_is_not_written_through(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    (tmp_path / "train.jsonl.tmp").symlink_to(victim)
    code, _ = _export(capsys, batch, tmp_path / "train.jsonl", fmt="specforge")
    assert code == 0 and victim.read_text() == "keep me\n"


# -- item 8: a full disk at every fill level ------------------------------------------------

def _assert_clean_failure(code: int, err: str, out: Path, earlier: dict[str, str]) -> None:
    assert code == 2, err
    assert "disk full (ENOSPC)" in _one_line(err)
    assert not list(out.parent.glob("*.tmp")), list(out.parent.iterdir())
    assert _tree(out.parent) == earlier


@pytest.mark.parametrize("fmt", ["parquet", "speculators"])
def test_enospc_injected_at_every_fill_level(
        batch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    out_dir = tmp_path / "exports"
    out_dir.mkdir()
    out = out_dir / f"train.{fmt}"
    assert _export(capsys, batch, out, fmt=fmt)[0] == 0
    earlier = _tree(out_dir)
    measure = DiskBudget(1 << 40)
    inject_full_disk(monkeypatch, measure, fsio)  # data file and manifest
    assert _export(capsys, batch, out, "--force", fmt=fmt)[0] == 0
    total = measure.used
    assert _tree(out_dir) == earlier  # the same bytes again: a fair reference
    levels = 30
    for step in range(levels):
        inject_full_disk(monkeypatch, DiskBudget(total * step // levels), fsio)
        code, err = _export(capsys, batch, out, "--force", fmt=fmt)
        _assert_clean_failure(code, err, out, earlier)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "fs"
    point.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs",
                        str(point)], check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError, PermissionError) as e:
        pytest.skip(f"cannot mount a small tmpfs here ({e}); the injected test covers it")
    yield point
    if subprocess.run(["umount", str(point)], check=False, capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(point)], check=True, capture_output=True)


def _fill(point: Path, leave: int) -> Path:
    """A filler file taking all but ``leave`` bytes of the file system."""
    filler = point / "filler"
    free = os.statvfs(point).f_bavail * os.statvfs(point).f_frsize
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.slow  # a real tmpfs filled 24 times, 25 exports (the injected-ENOSPC tests stay quick)
def test_a_real_full_disk_at_24_fill_levels(
        tmp_path: Path, small_fs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_batch(tmp_path / "big", [make_row(i) for i in range(600)], max_rows=200)
    out = small_fs / "exports" / "train.parquet"
    out.parent.mkdir()
    assert _export(capsys, source, out)[0] == 0
    earlier = _tree(out.parent)
    need = out.stat().st_size + (out.parent / "train.parquet.manifest.json").stat().st_size
    failed = 0
    for level in range(24):
        filler = _fill(small_fs, need * level // 24)
        code, err = _export(capsys, source, out, "--force")
        filler.unlink()
        if code == 0:  # fit after all (page rounding): the new export is complete
            assert pq.read_table(out).num_rows == Manifest.load(source).counts.done
            earlier = _tree(out.parent)
            continue
        failed += 1
        _assert_clean_failure(code, err, out, earlier)
    assert failed >= 20


# -- item 13: ids and lengths written by another tool ---------------------------------------

def _rewrite(batch: Path, edit: dict[int, dict[str, Any]]) -> None:
    """Edit rows of the first shard in place, as another tool would, and list the new
    checksum in the manifest (so the shard is trusted: only the flags lie)."""
    manifest = Manifest.load(batch)
    info = manifest.shards[0]
    path = batch / "shards" / info.name
    table = pq.read_table(path)
    rows = table.to_pylist()
    for index, change in edit.items():
        rows[index].update(change)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    data = path.read_bytes()
    manifest.shards[0] = msgspec.structs.replace(info, sha256=hashlib.sha256(data).hexdigest(),
                                 bytes=len(data))
    manifest.save_atomic()


def test_export_rechecks_ids_and_prompt_len_whatever_the_flags_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = [replace(make_row(i * 10)) for i in range(12)]  # KINDS[0]: no flags, "stop"
    batch = write_batch(tmp_path / "edited", clean, max_rows=20)
    ids = clean[0].input_ids
    _rewrite(batch, {
        0: {"input_ids": [*ids[:-1], 999999]},
        1: {"input_ids": [-5, *ids[1:]]},
        2: {"input_ids": [*ids[:-1], 2**31 - 1]},
        3: {"prompt_len": len(clean[3].input_ids) + 1},
        4: {"prompt_len": -1},
        5: {"input_ids": [], "prompt_len": 0},
    })
    out = tmp_path / "train.jsonl"
    code = main(["export", str(batch), "--format", "speculators", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    kept = {row["id"] for row in read_jsonl(out)}
    assert kept == {r.sample_id for r in clean[6:]}
    assert "id_out_of_range 3" in printed and "bad_prompt_len 2" in printed
    assert "empty_ids 1" in printed
    assert main(["stats", str(batch)]) == 0
    assert "export would keep 6 of 12" in capsys.readouterr().out


# -- item 14: a foreign sample id carrying escapes ------------------------------------------

def test_the_stored_twice_error_shows_escapes_never_runs_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "x\x1b]0;pwned\x07\x1b[2J"
    row: ShardRow = replace(make_row(0), sample_id=hostile)
    batch = write_batch(tmp_path / "foreign", [row, make_row(1), row])
    code, err = _export(capsys, batch, tmp_path / "t.jsonl", fmt="speculators")
    line = _one_line(err)
    assert code == 2 and "stored twice" in line
    assert "\x1b" not in err and "\x07" not in err
    assert "x␛]0;pwned␇␛[2J" in line
