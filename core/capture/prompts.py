"""Prompt files: JSONL (optionally gzip) or parquet records, streamed one at a time.

``open_prompts(path)`` checks the file up front (exists, readable, not empty, a format we
read) and raises ``ConfigError`` naming the path otherwise, so nothing is sent for a file
that cannot work. Iterating the returned :class:`PromptSource` yields, in file order,
a :class:`PromptRecord` for each usable record and a :class:`Reject` (file, line, reason)
for each malformed one; the batch goes on past rejects. Blank lines are skipped silently.

``line`` is the 1-based physical line of a JSONL file, or the 1-based row of a parquet file.
A UTF-8 byte-order mark at the start of a JSONL file is skipped. A file that breaks part-way
(a gzip file cut short, a parquet row group that cannot be decoded, a read error) keeps every
record read before and after the break: the break itself is a reject naming where it is
(the line after the last whole one; every row of an unreadable parquet row group), so it is
counted, logged and never silently lost. A line longer than :data:`MAX_LINE_BYTES` is a
reject too, and is never held in memory whole.
A record whose sample id already appeared earlier in the file is rejected (resume and the
shards key on the sample id, so two records must never share one).

Record shapes and normalization: see :mod:`core.capture.records`.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle_tui.core.capture.records import (
    Message,
    NormalizedRecord,
    RecordError,
    Tools,
    normalize_record,
)
from eagle_tui.core.capture.rejects import Reject, RejectLog
from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import open_regular, read_head
from eagle_tui.core.sample_ids import MAX_ID_CHARS
from eagle_tui.core.text import clip, utf8_safe

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
PARQUET_COLUMNS = ("id", "messages", "conversations", "tools", "system", "category")
PARQUET_BATCH_ROWS = 512
HASH_CHUNK = 1 << 20
READ_CHUNK = 64 << 10
MAX_LINE_BYTES = 64 << 20
"""Longest prompt line read: one record of 64 MiB is far beyond any context window."""
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class PromptRecord:
    """One usable prompt: its sample id, the messages to render, tools, and where it came from.

    ``messages`` never ends with an assistant turn and always holds a user turn.
    ``conversation`` is the whole record, trailing assistant turns included (multi-turn
    capture regenerates each of them).
    """

    sample_id: str
    messages: tuple[Message, ...]
    tools: Tools | None
    source: str
    line: int
    full_messages: tuple[Message, ...] = field(default=(), compare=False, repr=False)
    category: str | None = field(default=None, compare=False)  # for acceptance per category

    @property
    def conversation(self) -> tuple[Message, ...]:
        """Every message of the record, as the dataset has it."""
        return self.full_messages or self.messages


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
        return sum(1 for _ in _jsonl_lines(self.path, self.format))

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
        return PromptRecord(record.sample_id, record.messages, record.tools, source, line,
                            record.full_messages, record.category)


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
        with os.fdopen(open_regular(Path(path), "prompt file"), "rb") as handle:
            for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
                digest.update(chunk)
    except UnfitFile as e:
        raise ConfigError(str(e)) from None
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
    try:
        read_head(file, 1, "prompt file")  # a FIFO or device is refused, never waited on
    except UnfitFile as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(
            f"cannot read prompt file {file}: {e.strerror or e}; check its permissions"
        ) from e
    if file.stat().st_size == 0:
        raise ConfigError(f"prompt file {file} is empty; nothing to capture")


def _detect_format(file: Path) -> PromptFormat:
    """Parquet by magic bytes or suffix, gzip JSONL by magic bytes, else JSONL."""
    head = read_head(file, 4, "prompt file")
    if head == PARQUET_MAGIC or file.suffix == ".parquet":
        return "parquet"
    if head[:2] == GZIP_MAGIC:
        return "jsonl.gz"
    return "jsonl"


def _check_jsonl(file: Path, fmt: PromptFormat) -> None:
    """At least one non-blank line that can be read (reading only up to it)."""
    for _line, raw in _jsonl_lines(file, fmt):
        if isinstance(raw, _Broken):
            raise ConfigError(f"cannot read prompt file {file} as {fmt}: {raw.reason}")
        return
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


@dataclass(frozen=True, slots=True)
class _Broken:
    """Where a file stopped being readable (or a line too long to read), and why."""

    reason: str


def _jsonl_records(file: Path, fmt: PromptFormat) -> Iterator[tuple[int, object]]:
    """(line number, decoded JSON or RecordError) per non-blank line."""
    for line, raw in _jsonl_lines(file, fmt):
        if isinstance(raw, _Broken):
            yield line, RecordError(raw.reason)
        else:
            yield line, _decode_line(raw, line)


def _jsonl_lines(file: Path, fmt: PromptFormat) -> Iterator[tuple[int, bytes | _Broken]]:
    """(line number, bytes) of every non-blank line; a break in the file ends it with a
    ``_Broken`` at the line where reading stopped (never an exception)."""
    lines = _LineSplitter()
    chunks = _decompressed_chunks(file) if fmt == "jsonl.gz" else _plain_chunks(file)
    for chunk in chunks:
        if isinstance(chunk, _Broken):
            partial = ", this partial line was not" if lines.has_partial() else ""
            yield lines.line + 1, _Broken(
                f"{chunk.reason}; the file breaks off here, after {lines.line} whole lines "
                f"(every record before was read{partial})")
            return
        yield from lines.feed(chunk)
    yield from lines.end()


class _LineSplitter:
    """Bytes in, (line number, non-blank line) out; lines over MAX_LINE_BYTES are reported
    and skipped without being held whole."""

    def __init__(self) -> None:
        self.line = 0
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False

    def has_partial(self) -> bool:
        """True when a started line (not being skipped) holds more than blanks."""
        return not self._skipping and any(part.strip() for part in self._parts)

    def feed(self, chunk: bytes) -> Iterator[tuple[int, bytes | _Broken]]:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            yield from self._complete(chunk[start:end])
            start = end + 1
        if start < len(chunk):
            self._hold(chunk[start:])

    def end(self) -> Iterator[tuple[int, bytes | _Broken]]:
        if self._parts or self._skipping:
            yield from self._complete(b"")

    def _hold(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > MAX_LINE_BYTES:
            self._parts, self._size, self._skipping = [], 0, True

    def _complete(self, tail: bytes) -> Iterator[tuple[int, bytes | _Broken]]:
        self.line += 1
        if self._skipping:
            self._skipping = False
            yield self.line, _Broken(f"line is longer than {MAX_LINE_BYTES >> 20} MiB; skipped")
            return
        if self._parts:
            tail = b"".join([*self._parts, tail])
            self._parts, self._size = [], 0
        if self.line == 1 and tail.startswith(UTF8_BOM):
            tail = tail[len(UTF8_BOM):]
        if tail.strip():
            yield self.line, tail


def _plain_chunks(file: Path) -> Iterator[bytes | _Broken]:
    """The file's bytes in chunks; a read error ends it with ``_Broken``."""
    try:
        with open(file, "rb") as handle:
            while chunk := handle.read(READ_CHUNK):
                yield chunk
    except OSError as e:
        yield _Broken(f"read error ({e.strerror or e})")


def _decompressed_chunks(file: Path) -> Iterator[bytes | _Broken]:
    """A gzip file's decompressed bytes (every member), in bounded chunks; a truncated or
    corrupt stream ends it with ``_Broken`` after everything that could be decoded (up to
    the first bad byte of a corrupt stretch)."""
    decoder = zlib.decompressobj(wbits=31)
    started = False  # inside a member
    try:
        with open(file, "rb") as handle:
            while raw := handle.read(READ_CHUNK):
                data = raw
                while data:
                    if not started:
                        data = data.lstrip(b"\0")  # zero padding between members
                        if not data:
                            break
                        decoder, started = zlib.decompressobj(wbits=31), True
                    while data:
                        before = decoder.copy()
                        try:
                            out = decoder.decompress(data, READ_CHUNK)
                        except zlib.error as e:
                            yield _salvage(before, data)
                            yield _Broken(f"gzip data is corrupt ({e})")
                            return
                        data = decoder.unconsumed_tail
                        if out:
                            yield out
                        if decoder.eof:
                            break
                    if decoder.eof:
                        data, started = decoder.unused_data, False
    except OSError as e:
        yield _Broken(f"read error ({e.strerror or e})")
        return
    if started:
        yield _Broken("gzip stream ends early (the file was cut short)")


def _salvage(decoder: Any, data: bytes) -> bytes:
    """What ``decoder`` yields from the longest prefix of ``data`` that decodes (the bytes
    before a corrupt stretch), by bisection over the prefix length."""
    good, low, high = b"", 0, len(data)
    while low < high:
        middle = (low + high + 1) // 2
        try:
            good, low = decoder.copy().decompress(data[:middle], READ_CHUNK), middle
        except zlib.error:
            high = middle - 1
    return good


def _decode_line(raw: bytes, line: int = 0) -> object:
    """One line as JSON, or the RecordError saying why it is not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return RecordError(f"line is not UTF-8 (byte {e.start})")
    try:
        return json.loads(text)
    except RecursionError:
        return RecordError("line is JSON nested too deeply to read")
    except ValueError as e:
        return RecordError(f"line is not valid JSON: {e}")


def _parquet_records(file: Path) -> Iterator[tuple[int, object]]:
    """(row number, row as a dict) for every parquet row, one batch in memory at a time.

    Row groups are read one by one: a row group that cannot be decoded becomes one
    RecordError per row it holds (the footer says how many), and reading goes on with the
    next one. A batch that does not convert is retried row by row, so one bad value costs
    one row.
    """
    parquet = _parquet_file(file)
    columns = [c for c in PARQUET_COLUMNS if c in parquet.schema_arrow.names]
    first = 1
    for group in range(parquet.metadata.num_row_groups):
        rows = parquet.metadata.row_group(group).num_rows
        row = first
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns,
                                              row_groups=[group]):
                for record in _batch_records(batch):
                    yield row, record
                    row += 1
        except Exception as e:  # pyarrow raises OSError/ArrowInvalid/... for damaged data
            reason = (f"parquet row group {group} (rows {first}-{first + rows - 1}) cannot be "
                      f"read ({type(e).__name__}: {clip(str(e), 200)}); the other row groups "
                      "were read")
            for lost in range(row, first + rows):
                yield lost, RecordError(reason)
        first += rows


def _batch_records(batch: Any) -> list[object]:
    """A record batch as dicts; row by row (a RecordError for a bad one) if it must be."""
    try:
        return list(batch.to_pylist())
    except Exception:  # e.g. a string column holding invalid UTF-8
        out: list[object] = []
        for index in range(batch.num_rows):
            try:
                out.extend(batch.slice(index, 1).to_pylist())
            except Exception as e:
                out.append(RecordError(
                    f"row cannot be decoded ({type(e).__name__}: {clip(str(e), 200)})"))
        return out


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
            text = str(value)
            return utf8_safe(text[:MAX_ID_CHARS])
    return None

