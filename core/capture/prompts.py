"""Prompt files: JSONL (optionally gzip) or parquet records, streamed one at a time.

``open_prompts(path)`` checks the file up front (exists, readable, not empty, a format we
read) and raises ``ConfigError`` naming the path otherwise, so nothing is sent for a file
that cannot work. Iterating the returned :class:`PromptSource` yields, in file order,
a :class:`PromptRecord` for each usable record and a :class:`Reject` (file, line, reason)
for each malformed one; the batch goes on past rejects. Blank lines are skipped silently.

``line`` is the 1-based physical line of a JSONL file, or the 1-based row of a parquet file.
A record whose sample id already appeared earlier in the file is rejected (resume and the
shards key on the sample id, so two records must never share one).

Record shapes and normalization: see :mod:`core.capture.records`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, cast

from eagle_tui.core.capture.records import (
    Message,
    NormalizedRecord,
    RecordError,
    Tools,
    normalize_record,
)
from eagle_tui.core.capture.rejects import Reject, RejectLog
from eagle_tui.core.errors import ConfigError

__all__ = [
    "PromptRecord",
    "PromptSource",
    "Reject",
    "RejectLog",
    "open_prompts",
    "prompt_file_hash",
]

PromptFormat = Literal["jsonl", "jsonl.gz", "parquet"]

PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_COLUMNS = ("id", "messages", "conversations", "tools", "system")
PARQUET_BATCH_ROWS = 512
HASH_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class PromptRecord:
    """One usable prompt: its sample id, the messages to render, tools, and where it came from.

    ``messages`` never ends with an assistant turn and always holds a user turn.
    """

    sample_id: str
    messages: tuple[Message, ...]
    tools: Tools | None
    source: str
    line: int


class PromptSource:
    """A checked prompt file; iterate it for records and rejects (streamed, never loaded whole).

    Each iteration re-reads the file from the start.
    """

    def __init__(self, path: Path, fmt: PromptFormat) -> None:
        """Use :func:`open_prompts`, which checks the file first."""
        self.path = path
        self.format: PromptFormat = fmt

    def __iter__(self) -> Iterator[PromptRecord | Reject]:
        seen: dict[str, int] = {}
        for line, raw in self._raw_records():
            yield self._judge(line, raw, seen)

    def count(self) -> int:
        """Number of records (non-blank lines, or parquet rows), for progress totals."""
        if self.format == "parquet":
            return int(_parquet_file(self.path).metadata.num_rows)
        with _open_binary(self.path, self.format) as handle:
            return sum(1 for raw in handle if raw.strip())

    def sha256(self) -> str:
        """sha256 of the file's bytes (see :func:`prompt_file_hash`)."""
        return prompt_file_hash(self.path)

    def _raw_records(self) -> Iterator[tuple[int, object]]:
        """(line, decoded record or a RecordError) for every non-blank record."""
        if self.format == "parquet":
            return _parquet_records(self.path)
        return _jsonl_records(self.path, self.format)

    def _judge(self, line: int, raw: object, seen: dict[str, int]) -> PromptRecord | Reject:
        """A record, or a reject saying why not."""
        source = str(self.path)
        try:
            if isinstance(raw, RecordError):
                raise raw
            record: NormalizedRecord = normalize_record(raw)
        except RecordError as e:
            return Reject(source, line, e.reason, _raw_id(raw))
        first = seen.setdefault(record.sample_id, line)
        if first != line:
            reason = f"duplicate sample id {record.sample_id!r} (first at line {first})"
            return Reject(source, line, reason, record.sample_id)
        return PromptRecord(record.sample_id, record.messages, record.tools, source, line)


def open_prompts(path: str | Path) -> PromptSource:
    """Check a prompt file and return it ready to iterate.

    Raises ConfigError (naming the path and what to do) when the file does not exist, is a
    directory, cannot be read, is empty (or only blank lines / zero parquet rows), or is a
    parquet file without a ``messages`` or ``conversations`` column.
    """
    file = Path(path).expanduser()
    _check_is_readable_file(file)
    fmt = _detect_format(file)
    if fmt == "parquet":
        _check_parquet(file)
    else:
        _check_jsonl(file, fmt)
    return PromptSource(file, fmt)


def prompt_file_hash(path: str | Path) -> str:
    """sha256 (hex) of a prompt file's bytes, read in chunks; ConfigError if unreadable."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
                digest.update(chunk)
    except OSError as e:
        raise ConfigError(f"cannot read prompt file {path}: {e.strerror or e}") from e
    return digest.hexdigest()


# -- up-front checks -----------------------------------------------------------------------


def _check_is_readable_file(file: Path) -> None:
    """Exists, is a regular file, opens, and has bytes."""
    if not file.exists():
        raise ConfigError(
            f"prompt file {file} does not exist; pass a JSONL or parquet file of records "
            "with 'messages' (or ShareGPT 'conversations')"
        )
    if file.is_dir():
        raise ConfigError(f"prompt file {file} is a directory; pass a JSONL or parquet file")
    try:
        with open(file, "rb") as handle:
            handle.read(1)
    except OSError as e:
        raise ConfigError(
            f"cannot read prompt file {file}: {e.strerror or e}; check its permissions"
        ) from e
    if file.stat().st_size == 0:
        raise ConfigError(f"prompt file {file} is empty; nothing to capture")


def _detect_format(file: Path) -> PromptFormat:
    """Parquet by magic bytes or suffix, gzip JSONL by magic bytes, else JSONL."""
    with open(file, "rb") as handle:
        head = handle.read(4)
    if head == PARQUET_MAGIC or file.suffix == ".parquet":
        return "parquet"
    if head[:2] == GZIP_MAGIC:
        return "jsonl.gz"
    return "jsonl"


def _check_jsonl(file: Path, fmt: PromptFormat) -> None:
    """At least one non-blank line (reading only up to it)."""
    try:
        with _open_binary(file, fmt) as handle:
            has_record = any(raw.strip() for raw in handle)
    except (OSError, EOFError) as e:
        raise ConfigError(f"cannot read prompt file {file} as {fmt}: {e}") from e
    if not has_record:
        raise ConfigError(f"prompt file {file} holds only blank lines; nothing to capture")


def _check_parquet(file: Path) -> None:
    """A readable parquet file with rows and a messages/conversations column."""
    parquet = _parquet_file(file)
    columns = parquet.schema_arrow.names
    if "messages" not in columns and "conversations" not in columns:
        raise ConfigError(
            f"parquet prompt file {file} has no 'messages' or 'conversations' column "
            f"(columns: {', '.join(columns)})"
        )
    if parquet.metadata.num_rows == 0:
        raise ConfigError(f"parquet prompt file {file} has no rows; nothing to capture")


# -- streaming readers ---------------------------------------------------------------------


def _open_binary(file: Path, fmt: PromptFormat) -> IO[bytes]:
    """The file's decompressed bytes, line-iterable."""
    if fmt == "jsonl.gz":
        return cast(IO[bytes], gzip.open(file, "rb"))
    return open(file, "rb")


def _jsonl_records(file: Path, fmt: PromptFormat) -> Iterator[tuple[int, object]]:
    """(line number, decoded JSON or RecordError) per non-blank line."""
    with _open_binary(file, fmt) as handle:
        for line, raw in enumerate(handle, start=1):
            if raw.strip():
                yield line, _decode_line(raw)


def _decode_line(raw: bytes) -> object:
    """One line as JSON, or the RecordError saying why it is not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return RecordError(f"line is not UTF-8 (byte {e.start})")
    try:
        return json.loads(text)
    except ValueError as e:
        return RecordError(f"line is not valid JSON: {e}")


def _parquet_records(file: Path) -> Iterator[tuple[int, object]]:
    """(row number, row as a dict) for every parquet row, one batch in memory at a time."""
    parquet = _parquet_file(file)
    columns = [c for c in PARQUET_COLUMNS if c in parquet.schema_arrow.names]
    row = 0
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
        for record in batch.to_pylist():
            row += 1
            yield row, record


def _parquet_file(file: Path) -> Any:
    """``pyarrow.parquet.ParquetFile`` for ``file``; ConfigError when it is not parquet."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(file)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError for broken files
        raise ConfigError(f"cannot read prompt file {file} as parquet: {e}") from e


def _raw_id(raw: object) -> str | None:
    """The record's ``id`` as text when it has a usable one (for reject lines)."""
    if isinstance(raw, dict):
        value = raw.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None

