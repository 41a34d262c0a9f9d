"""What a shard file must be before its rows are believed, checked as the manifest is.

A shard's checksum in the manifest only says the file did not change since it was listed;
whoever can edit the file can fix the listing too. So a reader checks the file itself:

- its parquet footer is at most :data:`MAX_FOOTER_BYTES` (checked from the file's last 8
  bytes, before pyarrow parses it: a 50 MB footer would cost a gigabyte to read);
- every ``eagle_tui.*`` footer value is JSON of at most :data:`MAX_FOOTER_VALUE_BYTES`,
  nested at most :data:`MAX_JSON_DEPTH` deep (a 100,000-deep value exhausts any parser's
  stack) and of a known schema version;
- its columns are those of its schema version with their types (list children's names and
  the nullability a writer declares do not count: pyarrow's default writer declares every
  field nullable), so ``input_ids`` of strings or a missing ``prompt_len`` is refused
  before a row is read;
- a table read from it holds no null where the format has none (:func:`null_problem`,
  checked on every read, since a column's nulls are only known once it is read).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from eagle_tui.core.fsio import MIB, size_text
from eagle_tui.core.shards.schema import (
    ACCEPTANCE_COLUMN,
    ACCEPTANCE_FIELD,
    SHARD_SCHEMA_V2,
    schema_for,
)

MAX_FOOTER_BYTES = 16 * MIB
"""Largest parquet footer read: eagle-tui's are tens of KiB (a few dozen row groups)."""
PARQUET_TAIL = 8  # footer length (4 bytes, little endian) and the magic ``PAR1``


def footer_size_problem(path: Path) -> str | None:
    """Why ``path``'s parquet footer is not read (larger than any shard's), else None;
    what is not parquet at all is left to pyarrow to say."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < PARQUET_TAIL:
            return None
        handle.seek(size - PARQUET_TAIL)
        tail = handle.read(PARQUET_TAIL)
    if tail[4:] != b"PAR1":
        return None
    length = int.from_bytes(tail[:4], "little")
    if length > MAX_FOOTER_BYTES:
        return (f"its parquet footer is {length / MIB:.1f} MiB, larger than any shard's "
                f"({size_text(MAX_FOOTER_BYTES)})")
    return None


def schema_problem(schema: pa.Schema, version: int) -> str | None:
    """What in ``schema`` is not the shard format of ``version`` (a column missing or of
    another type), else None. Columns beyond the format's are left alone."""
    expected = schema_for(version, acceptance=ACCEPTANCE_COLUMN in schema.names)
    for field in expected:
        index = schema.get_field_index(field.name)
        if index < 0:
            return f"it has no {field.name} column (shard schema {version} has one)"
        found = schema.field(index).type
        if not same_type(found, field.type):
            return f"its {field.name} column is {found}, not {field.type}"
    return None


def same_type(found: pa.DataType, expected: pa.DataType) -> bool:
    """Equal types, whatever the names of list children and the nullability declared."""
    if pa.types.is_list(found) and pa.types.is_list(expected):
        return same_type(found.value_type, expected.value_type)
    if pa.types.is_struct(found) and pa.types.is_struct(expected):
        return ([f.name for f in found] == [f.name for f in expected]
                and all(same_type(a.type, b.type) for a, b in zip(found, expected, strict=True)))
    return bool(found == expected)


_REQUIRED = [f for f in SHARD_SCHEMA_V2 if not f.nullable]
_LISTS = {f.name for f in SHARD_SCHEMA_V2 if pa.types.is_list(f.type)}
assert ACCEPTANCE_FIELD.nullable  # a null acceptance is a row the server told nothing about


def null_problem(table: pa.Table) -> str | None:
    """The first column of ``table`` holding a null the format does not allow, said as a
    reason; None when there is none."""
    for field in _REQUIRED:
        if field.name not in table.column_names:
            continue
        column = table.column(field.name)
        if column.null_count:
            return f"its {field.name} column holds {column.null_count:,} null(s)"
        if field.name in _LISTS and any(chunk.values.null_count for chunk in column.chunks):
            return f"its {field.name} column holds a null inside a list"
    return None


__all__ = [
    "MAX_FOOTER_BYTES",
    "footer_size_problem",
    "null_problem",
    "same_type",
    "schema_problem",
]
