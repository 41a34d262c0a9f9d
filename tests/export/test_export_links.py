"""An export never writes, replaces or removes a file it reads, through any link (issue 39
item 17): a shard (or the batch's manifest) that is a symlink or a hard link to a file
outside the batch, and an ``--out`` naming that file, its manifest or their temp files, is
refused in one line (exit 2) before anything is written; the file and its 50 rows stay."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from export_helpers import make_row, write_batch

from eagle_tui.core.errors import ExportError
from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.tui.cli.main import main

ROWS = 50


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    """A batch of 50 rows in one shard."""
    return write_batch(tmp_path / "b1", [make_row(i) for i in range(ROWS)], max_rows=ROWS)


def _moved_out(link: Path, target: Path, *, hard: bool = False) -> None:
    """``link``'s file moved to ``target`` (outside the batch), ``link`` made a link to it."""
    target.parent.mkdir(exist_ok=True)
    os.replace(link, target)
    if hard:
        os.link(target, link)
    else:
        link.symlink_to(target)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# (which batch file goes outside, the name it gets there, symlink or hard link)
CASES = [
    ("shard", "train.parquet", False),                 # --out is the shard's own file
    ("shard", "train.parquet.manifest.json", False),   # the export's manifest would replace it
    ("shard", "train.parquet.tmp", False),             # the stale-temp clean-up would remove it
    ("shard", "train.parquet.manifest.json.tmp", False),
    ("shard", "train.parquet", True),                  # a hard link: the same inode
    ("manifest", "train.parquet", False),              # the batch's manifest.json
]


@pytest.mark.parametrize(("which", "name", "hard"), CASES,
                         ids=[f"{w}-{n}-{'hard' if h else 'sym'}" for w, n, h in CASES])
def test_force_never_replaces_a_file_the_export_reads_through_a_link(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        which: str, name: str, hard: bool) -> None:
    manifest = Manifest.load(batch)
    inside = (batch / "shards" / manifest.shards[0].name if which == "shard"
              else batch / "manifest.json")
    outside = tmp_path / "elsewhere" / name
    _moved_out(inside, outside, hard=hard)
    before = _sha(outside)
    out = tmp_path / "elsewhere" / "train.parquet"
    code = main(["export", str(batch), "--format", "parquet", "--out", str(out), "--force"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    # this check's line; a batch reader that refuses symlinked files outright (O_NOFOLLOW)
    # may refuse first, with its own line about the link: either way nothing is replaced
    assert "being exported (through a link)" in err or (not hard and "link" in err), err
    assert _sha(outside) == before and outside.exists()
    assert sorted(p.name for p in outside.parent.iterdir()) == [name]  # nothing written
    shard = batch / "shards" / manifest.shards[0].name
    assert pq.read_table(shard).num_rows == ROWS  # the 50 rows are all still there
    elsewhere = main(["export", str(batch), "--format", "parquet", "--out",
                      str(tmp_path / "ok.parquet")])
    # a hard link is the file itself; a symlinked batch file is read by no reader (issue 38:
    # every file in a batch directory is opened without following a link), in one line
    assert elsewhere == (0 if hard else 2), capsys.readouterr().err


def test_the_refusal_names_the_file_and_its_batch(batch: Path, tmp_path: Path) -> None:
    shard = batch / "shards" / Manifest.load(batch).shards[0].name
    outside = tmp_path / "data" / "train.jsonl"
    _moved_out(shard, outside, hard=True)
    with pytest.raises(ExportError) as refused:
        export([batch], outside, ExportOptions("specforge", force=True))
    assert str(refused.value) == (
        f"--out {outside}: {outside} is the file {shard} of the batch {batch} being exported "
        "(through a link); name a file that no source batch reads, e.g. in a new directory")
