"""``OUT.manifest.json``: what an export holds and where it came from.

Source batches and their shards (name, rows, sha256, bytes), the filter, the mask start,
rows kept and dropped per reason, the length report, the tokenizer fingerprint, and the data
file's own size and sha256. No timestamps: exporting the same shards with the same options
twice gives byte-identical manifests too.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.tally import KeepCounts
from eagle_tui.core.samples.job import SourceBatch

if TYPE_CHECKING:
    from eagle_tui.core.export.output import ExportSink

MANIFEST_SUFFIX = ".manifest.json"
EXPORT_MANIFEST_VERSION = 1


def manifest_path_for(data_path: Path) -> Path:
    """``train.jsonl`` -> ``train.jsonl.manifest.json`` (beside it)."""
    return data_path.with_name(data_path.name + MANIFEST_SUFFIX)


def build_manifest(path: Path, options: ExportOptions, batches: list[SourceBatch],
                   counts: KeepCounts, sink: ExportSink) -> bytes:
    """The manifest's bytes (sorted keys, one space indent, UTF-8, final newline)."""
    document: dict[str, Any] = {
        "version": EXPORT_MANIFEST_VERSION,
        "written_by": f"eagle-tui {_version()}",
        "format": options.format,
        "mask_start": options.effective_mask_start,
        "data": {"file": path.name, "rows": sink.rows, "bytes": sink.file.size,
                 "sha256": sink.file.hexdigest()},
        "filter": options.filter.to_json(),
        "counts": msgspec.to_builtins(counts),
        "tokenizer": _tokenizer(batches[0]),
        "sources": [_source(batch) for batch in batches],
    }
    text = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _tokenizer(batch: SourceBatch) -> dict[str, Any]:
    footer = batch.reader.metadata
    return {
        "fingerprint": batch.tokenizer_fingerprint,
        "path": batch.tokenizer_path,
        "name": footer.tokenizer.name if footer else None,
        "vocab_size": footer.tokenizer.vocab_size if footer else None,
    }


def _source(batch: SourceBatch) -> dict[str, Any]:
    return {
        "batch": str(batch.directory),
        "rows": batch.rows,
        "tokenizer_fingerprint": batch.tokenizer_fingerprint,
        "shards": [{"name": s.name, "rows": s.rows, "sha256": s.sha256, "bytes": s.bytes}
                   for s in batch.shards],
    }


def _version() -> str:
    try:
        return metadata.version("eagle-tui")
    except metadata.PackageNotFoundError:
        return "unknown"
