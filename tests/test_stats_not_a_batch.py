"""`eagle-tui stats` on a directory that is no batch (issue 39 item 1): the parent of several
batches or an empty directory is refused in one line with exit 2, as `export` and `inspect`
refuse it, never counted as a batch of 0 rows; an empty batch still reads 0 rows."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_inspect_cli import batch, tokenizer  # noqa: F401  (fixtures: a real captured batch)

from eagle_tui.core.shards.manifest import Manifest


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def parent(batch: Path, tmp_path: Path) -> Path:  # noqa: F811
    """A directory holding two copies of the batch (as a runs/ directory of batches)."""
    for name in ("kimi-a", "kimi-b"):
        shutil.copytree(batch, tmp_path / "runs" / name)
    return tmp_path / "runs"


@pytest.mark.parametrize("json", [False, True])
def test_the_parent_of_batches_is_refused_naming_them(parent: Path, json: bool) -> None:
    done = cli("stats", str(parent), *(["--json"] if json else []))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"eagle-tui stats: {parent} is not a batch directory")
    assert "kimi-a, kimi-b" in line and "pass one of them" in line
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("json", [False, True])
def test_an_empty_directory_is_refused(tmp_path: Path, json: bool) -> None:
    done = cli("stats", str(tmp_path), *(["--json"] if json else []))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "is not a batch directory (no manifest.json, no shards)" in line
    assert "pass a batch directory" in line


def test_several_paths_one_not_a_batch_is_refused_in_stats_words(parent: Path,
                                                                  tmp_path: Path) -> None:
    done = cli("stats", str(parent / "kimi-a"), str(tmp_path))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert f"{tmp_path} is not a batch directory: no manifest at" in line
    assert "exported" not in line  # stats is not exporting


def test_export_and_inspect_refuse_the_same_directory(parent: Path, tmp_path: Path) -> None:
    export = cli("export", str(parent), "--format", "parquet", "--out", str(tmp_path / "o.parquet"))
    inspect = cli("inspect", str(parent))
    assert export.returncode == 2 and inspect.returncode != 0
    assert "Traceback" not in export.stderr + inspect.stderr


def test_a_batch_without_rows_yet_still_reads_zero(batch: Path, tmp_path: Path) -> None:  # noqa: F811
    fresh = tmp_path / "fresh"
    manifest = Manifest(fresh, Manifest.load(batch).config)
    manifest.save_atomic()
    (fresh / "shards").mkdir()
    for path in (fresh, fresh / "shards"):
        done = cli("stats", str(path), "--json")
        assert done.returncode == 0, done.stderr
        assert '"rows": 0' in done.stdout
