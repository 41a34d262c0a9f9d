"""Issue 39 items 14 and 15, as reproduced: shards edited with the manifest's checksums fixed
to match (so the listing vouches for them), and a foreign shard whose one row group holds
2,000,000 rows. ``stats``, ``inspect`` and ``export`` refuse a tampered shard in one line
with exit 2 (never a traceback, never an export of what they cannot vouch for), and read a
huge row group in bounded memory (peak RSS of the real process, from ``wait4``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from export_helpers import config, make_row, write_batch
from support.foreign_shards import batch_of as listed_in
from support.foreign_shards import foreign_shard

from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.tui.cli.main import main

PEAK_RSS = Path(__file__).resolve().parents[1] / "support" / "peak_rss.py"
RSS_LIMIT_MIB = 300
VERBS = ("stats", "inspect", "export")

Edit = Callable[[pa.Table], pa.Table]


def refix_checksum(batch: Path) -> None:
    """List the first shard's new size and sha256, as whoever edited it would."""
    manifest = Manifest.load(batch)
    info = manifest.shards[0]
    data = (batch / "shards" / info.name).read_bytes()
    manifest.shards[0] = msgspec.structs.replace(
        info, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    manifest.save_atomic()


def tampered(directory: Path, edit: Edit) -> Path:
    batch = write_batch(directory, [make_row(i) for i in range(20)], max_rows=40)
    path = batch / "shards" / Manifest.load(batch).shards[0].name
    pq.write_table(edit(pq.read_table(path)), path)
    refix_checksum(batch)
    return batch


def footer_item(key: str, value: bytes) -> Edit:
    def edit(table: pa.Table) -> pa.Table:
        return table.replace_schema_metadata({**table.schema.metadata,
                                              f"eagle_tui.{key}".encode(): value})
    return edit


def ids_as_strings(table: pa.Table) -> pa.Table:
    ids = [[str(i) for i in row] for row in table.column("input_ids").to_pylist()]
    return table.set_column(table.schema.get_field_index("input_ids"), "input_ids",
                            pa.array(ids))


def null_sample_ids(table: pa.Table) -> pa.Table:
    return table.set_column(0, pa.field("sample_id", pa.string()),
                            pa.nulls(table.num_rows, pa.string()))


TAMPERS: dict[str, tuple[Edit, str]] = {
    "ids as strings": (ids_as_strings, "its input_ids column is list<element: string>"),
    "no prompt_len": (lambda t: t.drop_columns(["prompt_len"]), "it has no prompt_len column"),
    "null sample_id": (null_sample_ids, "its sample_id column holds 20 null(s)"),
    "garbage footer": (footer_item("tokenizer", b"\xff\xfe{garbage"),
                       "footer item eagle_tui.tokenizer is not JSON"),
    "deep footer": (footer_item("extra", b"[" * 100_000 + b"]" * 100_000),
                    "footer item eagle_tui.extra is nested more than 32 deep"),
    "schema_version 99": (footer_item("schema_version", b"99"),
                          "schema_version 99, a shard format this eagle-tui does not read"),
    "5 MB footer value": (footer_item("extra", json.dumps({"x": "a" * 5_000_000}).encode()),
                          "footer item eagle_tui.extra is 4.8 MiB"),
}


def run_verb(verb: str, batch: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> (
        tuple[int, str]):
    argv = {"stats": ["stats", str(batch)],
            "inspect": ["inspect", str(batch), "--index", "0", "--raw-ids"],
            "export": ["export", str(batch), "--format", "speculators", "--out", str(out)]}
    code = main(argv[verb])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("mode", list(TAMPERS))
def test_a_tampered_shard_is_refused_in_one_line(tmp_path: Path, mode: str, verb: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    edit, reason = TAMPERS[mode]
    batch = tampered(tmp_path / "b", edit)
    out = tmp_path / "train.jsonl"
    code, err = run_verb(verb, batch, out, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert reason in err and "part-00000.parquet" in err, err
    assert not out.exists()


def test_a_footer_naming_another_tokenizer_is_not_exported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = {"name": "other", "path": "/models/other", "fingerprint": "cd" * 32,
             "vocab_size": 1000}
    batch = tampered(tmp_path / "b", footer_item("tokenizer", json.dumps(other).encode()))
    out = tmp_path / "train.jsonl"
    code, err = run_verb("export", batch, out, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "names other (fingerprint cdcdcdcdcdcd…) in its footer" in err
    assert not out.exists()


# -- item 15: one row group of 2,000,000 rows ------------------------------------------------


def peak_mib(argv: list[str], cwd: Path, timeout: float = 240) -> tuple[int, str, float]:
    """(exit status, stderr, peak RSS in MiB) of ``eagle-tui ARGV`` in its own process."""
    rss = cwd / "rss.txt"
    done = subprocess.run([sys.executable, str(PEAK_RSS), str(rss), str(timeout), "--",
                           sys.executable, "-m", "eagle_tui.tui.cli", *argv],
                          cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=timeout + 30)
    return done.returncode, done.stderr, int(rss.read_text()) / 1024


@pytest.mark.slow
def test_one_two_million_row_group_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """Item 15: ``inspect --index 0`` reached 2.4 GB and ``stats`` 2.3 GB on this 1.4 MB
    file, which pyarrow inflates whole when a row group is read at once."""
    shard = foreign_shard(tmp_path / "foreign.parquet", 2_000_000, 2_000_000)
    assert shard.stat().st_size < 3_000_000 and pq.ParquetFile(shard).num_row_groups == 1
    figures = {}
    for name, argv in {"inspect --index 0": ["inspect", str(shard), "--index", "0",
                                              "--raw-ids"],
                       "inspect --index -1": ["inspect", str(shard), "--index", "-1",
                                              "--raw-ids"]}.items():
        code, err, figures[name] = peak_mib(argv, tmp_path)
        assert code == 0, err
    print("peak RSS (MiB):", {k: round(v) for k, v in figures.items()})
    assert max(figures.values()) < RSS_LIMIT_MIB, figures


@pytest.mark.slow
def test_a_fifty_megabyte_footer_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Item 15: export reached 1 GB reading a 50 MB footer value."""
    batch = tampered(tmp_path / "b", footer_item("extra", b'"' + b"a" * 50_000_000 + b'"'))
    code, err, peak = peak_mib(["export", str(batch), "--format", "speculators", "--out",
                                str(tmp_path / "t.jsonl")], tmp_path)
    print(f"peak RSS {peak:.0f} MiB")
    assert code == 2 and err.count("\n") == 1 and "parquet footer is" in err, err
    assert peak < RSS_LIMIT_MIB


@pytest.mark.slow
def test_stats_and_export_cost_the_same_whatever_the_row_group_size(tmp_path: Path) -> None:
    """Item 15: the same 400,000 rows in one row group and in groups of 512 rows (the
    writer's) cost ``stats`` and ``export`` the same memory: what grows with the rows (the
    percentiles' values, the sample ids checked for repeats) is all that grows."""
    figures: dict[str, float] = {}
    for group_rows in (400_000, 512):
        shard = foreign_shard(tmp_path / f"g{group_rows}.parquet", 400_000, group_rows)
        batch = listed_in(shard, tmp_path / f"batch{group_rows}", config())
        out = tmp_path / f"g{group_rows}.jsonl"
        for verb, argv in {"stats": ["stats", str(batch)],
                           "export": ["export", str(batch), "--format", "speculators",
                                      "--out", str(out)]}.items():
            code, err, figures[f"{verb}, groups of {group_rows:,}"] = peak_mib(argv, tmp_path)
            assert code == 0, err
    print("peak RSS (MiB):", {k: round(v) for k, v in figures.items()})
    for verb in ("stats", "export"):
        one, many = figures[f"{verb}, groups of 400,000"], figures[f"{verb}, groups of 512"]
        assert one < many + 64, figures
