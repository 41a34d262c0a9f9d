"""``OUT.manifest.json``: what an export holds and where it came from.

Source batches and their shards (name, rows, sha256, bytes), the filter, the mask start,
rows kept and dropped per reason, the length report, the tokenizer fingerprint, and the data
file's own size and sha256. No timestamps: exporting the same shards with the same options
twice gives byte-identical manifests too.

The document is one ``ExportManifest`` struct, written with sorted keys, one space of
indent, UTF-8 (as ``json.dumps(..., indent=1, sort_keys=True, ensure_ascii=False)`` wrote
it) and read back by ``ExportManifest.decode``.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from eagle_tui.core.export.options import ExportFormat, ExportOptions, MaskStart, RowFilter
from eagle_tui.core.export.tally import KeepCounts
from eagle_tui.core.samples.job import SourceBatch
from eagle_tui.core.validate import FLAGS

if TYPE_CHECKING:
    from eagle_tui.core.export.output import ExportSink

MANIFEST_SUFFIX = ".manifest.json"
EXPORT_MANIFEST_VERSION = 1
_SORTED = msgspec.json.Encoder(order="sorted")


class _Part(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the manifest's parts: built by keyword, nothing unknown read."""


class FileDoc(_Part, frozen=True):
    """A file the export read or wrote (a source shard): its name, rows, size and sha256,
    written in name order like every key of the manifest."""

    name: str
    rows: int
    sha256: str
    bytes: int


class DataFile(FileDoc, frozen=True):
    """The exported file; its name (beside the manifest) is written as ``file``."""

    name: str = msgspec.field(name="file")


class FilterDoc(_Part, frozen=True):
    """The row filter: flags dropped (in ``FLAGS`` order), finish reasons kept (None: all)."""

    drop_flags: list[str]
    finish: list[str] | None

    @classmethod
    def of(cls, row_filter: RowFilter) -> FilterDoc:
        """``row_filter`` in a stable order."""
        return cls(drop_flags=[flag for flag in FLAGS if flag in row_filter.drop_flags],
                   finish=None if row_filter.finish is None else sorted(row_filter.finish))


class TokenizerDoc(_Part, frozen=True):
    """The tokenizer the ids are of (name and vocabulary from the first batch's footer)."""

    fingerprint: str
    path: str
    name: str | None
    vocab_size: int | None

    @classmethod
    def of(cls, batch: SourceBatch) -> TokenizerDoc:
        """The tokenizer of ``batch``."""
        footer = batch.reader.metadata
        return cls(fingerprint=batch.tokenizer_fingerprint, path=batch.tokenizer_path,
                   name=footer.tokenizer.name if footer else None,
                   vocab_size=footer.tokenizer.vocab_size if footer else None)


class SourceDoc(_Part, frozen=True):
    """One source batch: its directory, rows, tokenizer fingerprint and shards."""

    batch: str
    rows: int
    tokenizer_fingerprint: str
    shards: list[FileDoc]

    @classmethod
    def of(cls, batch: SourceBatch) -> SourceDoc:
        """The entry of ``batch``."""
        return cls(batch=str(batch.directory), rows=batch.rows,
                   tokenizer_fingerprint=batch.tokenizer_fingerprint,
                   shards=[FileDoc(name=s.name, rows=s.rows, sha256=s.sha256, bytes=s.bytes)
                           for s in batch.shards])


class ExportManifest(_Part, frozen=True):
    """The whole manifest."""

    version: int
    written_by: str
    format: ExportFormat
    mask_start: MaskStart
    data: DataFile
    filter: FilterDoc
    counts: KeepCounts
    tokenizer: TokenizerDoc
    sources: list[SourceDoc]

    def encode(self) -> bytes:
        """The manifest's bytes (sorted keys, one space indent, UTF-8, final newline)."""
        return msgspec.json.format(_SORTED.encode(self), indent=1) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> ExportManifest:
        """The manifest ``data`` holds (msgspec.ValidationError names a field that does not
        fit)."""
        return msgspec.json.decode(data, type=cls)


def manifest_path_for(data_path: Path) -> Path:
    """``train.jsonl`` -> ``train.jsonl.manifest.json`` (beside it)."""
    return data_path.with_name(data_path.name + MANIFEST_SUFFIX)


def build_manifest(path: Path, options: ExportOptions, batches: list[SourceBatch],
                   counts: KeepCounts, sink: ExportSink) -> bytes:
    """The manifest's bytes (see ``ExportManifest.encode``)."""
    return ExportManifest(
        version=EXPORT_MANIFEST_VERSION, written_by=f"eagle-tui {_version()}",
        format=options.format, mask_start=options.effective_mask_start,
        data=DataFile(name=path.name, rows=sink.rows, bytes=sink.file.size,
                      sha256=sink.file.hexdigest()),
        filter=FilterDoc.of(options.filter), counts=counts,
        tokenizer=TokenizerDoc.of(batches[0]),
        sources=[SourceDoc.of(batch) for batch in batches]).encode()


def _version() -> str:
    try:
        return metadata.version("eagle-tui")
    except metadata.PackageNotFoundError:
        return "unknown"
