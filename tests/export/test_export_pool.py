"""The export allocates from jemalloc where pyarrow has it, leaves a pool the user chose, and
puts the previous pool back however it ends; the bytes out are the same on every pool."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from export_helpers import make_row, write_batch

from eagle_tui.core.errors import ExportError
from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.output import ExportSink
from eagle_tui.core.export.pool import CHOSEN_BY_USER
from eagle_tui.core.export.run import export

FORMATS = ("speculators", "specforge", "parquet")


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_batch(tmp_path_factory.mktemp("pool") / "batch", [make_row(i) for i in range(40)])


@pytest.fixture
def pools_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The default pool's backend each time the export writes a row group."""
    seen: list[str] = []
    write = ExportSink.write

    def recording(self: ExportSink, table: pa.Table, keep: pa.BooleanArray) -> None:
        seen.append(pa.default_memory_pool().backend_name)
        write(self, table, keep)

    monkeypatch.setattr(ExportSink, "write", recording)
    monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    return seen


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def exported(batch: Path, out: Path, fmt: Any) -> str:
    export([batch], out, ExportOptions(fmt))
    return digest(out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rows_are_written_on_jemalloc_and_the_previous_pool_is_back(
    batch: Path, tmp_path: Path, pools_seen: list[str], fmt: Any
) -> None:
    before = pa.default_memory_pool().backend_name
    exported(batch, tmp_path / "out", fmt)
    assert pools_seen and set(pools_seen) == {"jemalloc"}
    assert pa.default_memory_pool().backend_name == before


def test_a_failed_export_puts_the_previous_pool_back(
    batch: Path, tmp_path: Path, pools_seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = pa.default_memory_pool().backend_name

    def full(self: ExportSink, table: pa.Table, keep: pa.BooleanArray) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ExportSink, "write", full)
    with pytest.raises(ExportError, match="disk full"):
        export([batch], tmp_path / "out.jsonl", ExportOptions("speculators"))
    assert pa.default_memory_pool().backend_name == before
    assert not list(tmp_path.iterdir())


def test_a_pool_chosen_by_the_user_is_kept(
    batch: Path, tmp_path: Path, pools_seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CHOSEN_BY_USER, "system")
    before = pa.default_memory_pool().backend_name
    exported(batch, tmp_path / "out.jsonl", "speculators")
    assert set(pools_seen) == {before}


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_jemalloc_the_default_pool_writes_the_same_bytes(
    batch: Path, tmp_path: Path, pools_seen: list[str], monkeypatch: pytest.MonkeyPatch,
    fmt: Any
) -> None:
    on_jemalloc = exported(batch, tmp_path / "jemalloc", fmt)

    def not_built() -> pa.MemoryPool:
        raise pa.ArrowNotImplementedError("This Arrow build does not enable jemalloc")

    monkeypatch.setattr(pa, "jemalloc_memory_pool", not_built)
    before = pa.default_memory_pool().backend_name
    pools_seen.clear()
    assert exported(batch, tmp_path / "default", fmt) == on_jemalloc
    assert set(pools_seen) == {before} != {"jemalloc"}
