"""The shard format: one parquet row per generation, plus file metadata (docs/shard-format.md).

Columns (in this order; see :data:`SHARD_SCHEMA`):

    sample_id      string                 stable id (record id or content hash, + variant)
    input_ids      list<int32>            prompt ids followed by output ids, as sent/received
    prompt_len     int32                  number of prompt tokens (loss mask starts here)
    finish_reason  string                 "stop", "length" or "abort"
    matched_stop   int64, nullable        the stop token id when a token stopped generation
    think_end      int32                  index in input_ids of the first generated
                                          end-of-reasoning token, -1 if none
    flags          list<string>           validation flags (core.validate); empty = clean
    endpoint       string                 server that produced it (never credentials)
    rid            string                 request id
    latency_s      float32                end-to-end latency
    created_at     timestamp[us, UTC]

Schema version 2 (multi-turn batches, ``capture --turns all``) appends three columns
(:data:`SHARD_SCHEMA_V2`):

    conversation_id  string               the conversation (record id, + preset suffix)
    turn             int32                which assistant turn of it (0-based)
    parent_id        string, nullable     sample id of the row whose answer is the latest
                                          model answer in this row's history (null for
                                          turn 0 and for dataset histories)

Single-turn batches keep writing version 1, so a batch never mixes the two; readers take
both (a version-1 row reads with those three as None).

Batches begun since per-request acceptance is stored (their manifest says
``acceptance_column``) append one more column to either version (:data:`ACCEPTANCE_FIELD`):

    acceptance     struct, nullable       the answer's speculative-decoding counts, from
                                          SGLang's ``meta_info`` (null: it had none)
        completion_tokens  int32          ``completion_tokens``
        verify_steps       int32          ``spec_verify_ct``
        correct_drafts     int32          ``spec_num_correct_drafts``
        proposed_drafts    int32          ``spec_num_proposed_drafts``
        histogram          list<int32>    ``spec_correct_drafts_histogram``

Its fields are ``core.accept.requests.RequestAcceptance``'s, so a stored value converts
back with ``msgspec.convert``; every figure (accept length, rate, P(>=j)) is derived from
them, never stored. Older shards have no such column and read with ``acceptance`` None.

List children are named ``element`` (as parquet's compliant nested types name them), so
the schema read back from a file equals :data:`SHARD_SCHEMA` exactly.

File metadata: one key per item, each prefixed ``eagle_tui.``, values JSON
(see :class:`ShardMetadata`, the struct that declares them).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any

import msgspec
import pyarrow as pa

from eagle_tui.core.errors import ShardError
from eagle_tui.core.fsio import MIB
from eagle_tui.core.wire import explain

SCHEMA_VERSION = 1
MULTI_TURN_SCHEMA_VERSION = 2
KNOWN_SCHEMA_VERSIONS = (SCHEMA_VERSION, MULTI_TURN_SCHEMA_VERSION)
METADATA_PREFIX = "eagle_tui."
MAX_FOOTER_VALUE_BYTES = MIB
"""Largest footer item read: eagle-tui's are under a few KiB (servers, sampling, ids)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of a footer item read: eagle-tui's nest three or four deep."""

SHARD_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("input_ids", pa.list_(pa.field("element", pa.int32())), nullable=False),
        pa.field("prompt_len", pa.int32(), nullable=False),
        pa.field("finish_reason", pa.string(), nullable=False),
        pa.field("matched_stop", pa.int64(), nullable=True),
        pa.field("think_end", pa.int32(), nullable=False),
        pa.field("flags", pa.list_(pa.field("element", pa.string())), nullable=False),
        pa.field("endpoint", pa.string(), nullable=False),
        pa.field("rid", pa.string(), nullable=False),
        pa.field("latency_s", pa.float32(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
COLUMNS: tuple[str, ...] = tuple(SHARD_SCHEMA.names)
TURN_COLUMNS: tuple[str, ...] = ("conversation_id", "turn", "parent_id")
SHARD_SCHEMA_V2: pa.Schema = pa.schema([
    *SHARD_SCHEMA,
    pa.field("conversation_id", pa.string(), nullable=False),
    pa.field("turn", pa.int32(), nullable=False),
    pa.field("parent_id", pa.string(), nullable=True),
])


_COUNT = pa.int32()
ACCEPTANCE_COLUMN = "acceptance"
ACCEPTANCE_FIELD: pa.Field = pa.field(ACCEPTANCE_COLUMN, pa.struct([
    pa.field("completion_tokens", _COUNT, nullable=False),
    pa.field("verify_steps", _COUNT, nullable=False),
    pa.field("correct_drafts", _COUNT, nullable=False),
    pa.field("proposed_drafts", _COUNT, nullable=False),
    pa.field("histogram", pa.list_(pa.field("element", _COUNT)), nullable=False),
]), nullable=True)
ACCEPTANCE_COUNTS: tuple[str, ...] = tuple(
    field.name for field in ACCEPTANCE_FIELD.type if field.name != "histogram")
MAX_COUNT = (1 << 31) - 1
"""The largest count the acceptance column holds (int32)."""


def schema_for(version: int, *, acceptance: bool = False) -> pa.Schema:
    """The arrow schema of shards written with ``version`` (and the acceptance column)."""
    schema = SHARD_SCHEMA_V2 if version >= MULTI_TURN_SCHEMA_VERSION else SHARD_SCHEMA
    return schema.append(ACCEPTANCE_FIELD) if acceptance else schema


@dataclass(frozen=True, slots=True)
class ShardRow:
    """One generation as stored. ``created_at`` must be timezone-aware (UTC)."""

    sample_id: str
    input_ids: Sequence[int]
    prompt_len: int
    finish_reason: str
    matched_stop: int | None
    think_end: int
    flags: Sequence[str]
    endpoint: str
    rid: str
    latency_s: float
    created_at: datetime
    conversation_id: str | None = None
    turn: int | None = None
    parent_id: str | None = None
    acceptance: Mapping[str, Any] | None = None
    """The answer's acceptance counts (the fields of :data:`ACCEPTANCE_FIELD`), None when
    the server returned none or the shard predates the column."""

    @property
    def prompt_ids(self) -> Sequence[int]:
        """The prompt part of ``input_ids``."""
        return self.input_ids[: self.prompt_len]

    @property
    def output_ids(self) -> Sequence[int]:
        """The generated part of ``input_ids``."""
        return self.input_ids[self.prompt_len :]

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ShardRow:
        """A row as read back from parquet (``to_pylist`` form), of either schema version,
        with or without the acceptance column."""
        values: dict[str, Any] = {name: row[name] for name in COLUMNS}
        values.update((name, row.get(name)) for name in (*TURN_COLUMNS, ACCEPTANCE_COLUMN))
        return cls(**values)


class FooterTokenizer(msgspec.Struct, frozen=True, kw_only=True):
    """``eagle_tui.tokenizer``: which tokenizer made the ids (its fingerprint is sha256 over
    the vocabulary and the added/special tokens) and the id bound validation used."""

    name: str = ""
    path: str = ""
    fingerprint: str = ""
    vocab_size: int | None = None


class FooterServer(msgspec.Struct, frozen=True, kw_only=True):
    """``eagle_tui.server``: what the first server said it serves (None: it did not say)."""

    model_path: str | None = None
    version: str | None = None


class ShardMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """Provenance stored in every shard's parquet footer (and the manifest): one footer key
    per field, ``eagle_tui.<field>``, its value JSON (docs/shard-format.md).

    ``sampling`` and ``boundary_ids`` are JSON-ready dicts (``SamplingParams.to_json()``,
    ``BoundaryIds.as_dict()``); ``extra`` holds anything else worth keeping.
    """

    schema_version: int = SCHEMA_VERSION
    tokenizer: FooterTokenizer = FooterTokenizer()
    template_hash: str = msgspec.field(default="", name="chat_template_hash")
    sampling: dict[str, Any] = {}
    server: FooterServer = FooterServer()
    boundary_ids: dict[str, Any] = {}
    extra: dict[str, Any] = {}

    def to_parquet(self) -> dict[bytes, bytes]:
        """Footer key/value pairs: ``eagle_tui.<item>`` -> JSON (keys sorted)."""
        items: dict[str, Any] = msgspec.to_builtins(self)
        return {(METADATA_PREFIX + key).encode(): _FOOTER_JSON.encode(value)
                for key, value in items.items()}

    @classmethod
    def from_parquet(cls, raw: Mapping[bytes, bytes] | None) -> ShardMetadata | None:
        """Read the footer back; None when the file was not written by eagle-tui. ShardError
        names the item and field that does not fit (``eagle_tui.tokenizer.vocab_size: ...``).
        """
        items = _prefixed_items(raw or {})
        if "schema_version" not in items:
            return None
        try:
            metadata = msgspec.convert(items, cls)
        except msgspec.ValidationError as e:
            raise ShardError(f"shard footer item {explain(e, root=METADATA_PREFIX[:-1])} "
                             "does not fit") from None
        if metadata.schema_version not in KNOWN_SCHEMA_VERSIONS:
            raise ShardError(
                f"shard footer says {METADATA_PREFIX}schema_version {metadata.schema_version}, "
                f"a shard format this eagle-tui does not read (it reads "
                f"{', '.join(map(str, KNOWN_SCHEMA_VERSIONS))}: read it with the eagle-tui "
                "that wrote it")
        return metadata


_FOOTER_JSON = msgspec.json.Encoder(order="sorted")


def _prefixed_items(raw: Mapping[bytes, bytes]) -> dict[str, Any]:
    """``eagle_tui.*`` footer entries, decoded from JSON; ShardError names one that is not
    small, shallow JSON (eagle-tui writes nothing else there)."""
    items: dict[str, Any] = {}
    prefix = METADATA_PREFIX.encode()
    for key, value in raw.items():
        if key.startswith(prefix):
            name = key.decode("utf-8", "replace")
            items[name[len(METADATA_PREFIX):]] = footer_value(name, value)
    return items


def footer_value(name: str, value: bytes) -> Any:
    """The JSON of one footer item, checked for size and depth before it is parsed."""
    if len(value) > MAX_FOOTER_VALUE_BYTES:
        raise ShardError(f"shard footer item {name} is {len(value) / MIB:.1f} MiB, more than "
                         f"any eagle-tui footer item ({MAX_FOOTER_VALUE_BYTES // MIB} MiB)")
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ShardError(f"shard footer item {name} is nested more than {MAX_JSON_DEPTH} "
                         "deep")
    try:
        return json.loads(value)
    except ValueError as e:  # UnicodeDecodeError included
        raise ShardError(f"shard footer item {name} is not JSON ({e})") from None


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(data: bytes) -> int:
    """How deep ``data``'s arrays and objects nest (brackets inside strings do not count),
    found without parsing it; stops counting past :data:`MAX_JSON_DEPTH`."""
    depth = deepest = 0
    for bracket in _STRING.sub(b"", data).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                break
    return deepest


def rows_to_table(rows: Sequence[ShardRow], version: int = SCHEMA_VERSION, *,
                  acceptance: bool = False) -> pa.Table:
    """An arrow table of ``rows`` with exactly :func:`schema_for` ``version`` (no file
    metadata); version 2 needs every row's ``conversation_id`` and ``turn``. With
    ``acceptance`` the table has the acceptance column (without it a row's acceptance is
    left out: a batch whose shards lack the column keeps lacking it).

    Every column is built from flat buffers, not with ``pa.array`` over Python lists: that
    costs ~0.1 ms per row for the token lists, and its first call in a process imports pandas
    when it is installed (~0.3 CPU-s). Wrong values still raise (OverflowError, TypeError).
    """
    columns = {
        "sample_id": _strings([r.sample_id for r in rows]),
        "input_ids": _id_lists([r.input_ids for r in rows]),
        "prompt_len": _fixed(pa.int32(), array("i", [r.prompt_len for r in rows])),
        "finish_reason": _strings([r.finish_reason for r in rows]),
        "matched_stop": _nullable_int64([r.matched_stop for r in rows]),
        "think_end": _fixed(pa.int32(), array("i", [r.think_end for r in rows])),
        "flags": _string_lists([r.flags for r in rows]),
        "endpoint": _strings([r.endpoint for r in rows]),
        "rid": _strings([r.rid for r in rows]),
        "latency_s": _fixed(pa.float32(), array("f", [r.latency_s for r in rows])),
        "created_at": _fixed(SHARD_SCHEMA.field("created_at").type,
                             array("q", [_micros(r.created_at) for r in rows])),
    }
    if version >= MULTI_TURN_SCHEMA_VERSION:
        columns.update(_turn_columns(rows))
    if acceptance:
        columns[ACCEPTANCE_COLUMN] = _acceptance_column([r.acceptance for r in rows])
    schema = schema_for(version, acceptance=acceptance)
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def _turn_columns(rows: Sequence[ShardRow]) -> dict[str, pa.Array]:
    """The multi-turn columns; a row without its conversation or turn cannot be stored."""
    if any(r.conversation_id is None or r.turn is None for r in rows):
        raise ValueError("a multi-turn shard row needs conversation_id and turn")
    return {
        "conversation_id": _strings([r.conversation_id or "" for r in rows]),
        "turn": _fixed(pa.int32(), array("i", [r.turn or 0 for r in rows])),
        "parent_id": pa.array([r.parent_id for r in rows], pa.string()),
    }


def _acceptance_column(values: Sequence[Mapping[str, Any] | None]) -> pa.Array:
    """The acceptance structs, null where a row has none (its children then hold zeros and
    an empty histogram, hidden by the struct's validity). A count beyond int32 raises
    OverflowError, as an id does."""
    present = [value or {} for value in values]
    kind = ACCEPTANCE_FIELD.type
    children = [_fixed(_COUNT, array("i", [v.get(name, 0) for v in present]))
                for name in ACCEPTANCE_COUNTS]
    histograms = [v.get("histogram", ()) for v in present]
    counts = _fixed(_COUNT, array("i", [n for h in histograms for n in h]))
    offsets = _fixed(pa.int32(), _offsets(map(len, histograms)))
    children.append(pa.ListArray.from_arrays(offsets, counts,
                                             type=kind.field("histogram").type))
    missing = pa.Array.from_buffers(pa.bool_(), len(values),
                                    [None, _bitmap([value is None for value in values])])
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=missing)


def _fixed(kind: pa.DataType, values: array[Any]) -> pa.Array:
    """A column without nulls over the bytes of ``values`` (same width as ``kind``)."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _offsets(lengths: Iterable[int]) -> array[int]:
    return array("i", accumulate(lengths, initial=0))


def _id_lists(lists: Sequence[Sequence[int]]) -> pa.Array:
    """``input_ids``: one flat int32 buffer plus offsets. Capture rows hold ``array('i')``,
    whose bytes are copied as they are."""
    flat = array("i")
    for ids in lists:
        flat.extend(ids if isinstance(ids, array) and ids.typecode == "i" else array("i", ids))
    offsets = _fixed(pa.int32(), _offsets(map(len, lists)))
    kind = SHARD_SCHEMA.field("input_ids").type
    return pa.ListArray.from_arrays(offsets, _fixed(pa.int32(), flat), type=kind)


def _strings(values: Sequence[str]) -> pa.Array:
    """A utf8 column: the encoded values back to back, and their offsets."""
    encoded = [value.encode() for value in values]
    offsets = pa.py_buffer(_offsets(map(len, encoded)))
    return pa.Array.from_buffers(pa.string(), len(values),
                                 [None, offsets, pa.py_buffer(b"".join(encoded))])


def _string_lists(lists: Sequence[Sequence[str]]) -> pa.Array:
    offsets = _fixed(pa.int32(), _offsets(map(len, lists)))
    values = _strings([item for items in lists for item in items])
    return pa.ListArray.from_arrays(offsets, values, type=SHARD_SCHEMA.field("flags").type)


def _bitmap(bits: Sequence[bool]) -> pa.Buffer:
    """Arrow's bit layout of ``bits``: least significant bit first."""
    packed = sum(1 << i for i, bit in enumerate(bits) if bit)
    return pa.py_buffer(packed.to_bytes((len(bits) + 7) // 8, "little"))


def _nullable_int64(values: Sequence[int | None]) -> pa.Array:
    """An int64 column where None is null (validity bitmap, least significant bit first)."""
    bitmap = _bitmap([value is not None for value in values])
    data = pa.py_buffer(array("q", [0 if value is None else value for value in values]))
    nulls = sum(1 for value in values if value is None)
    return pa.Array.from_buffers(pa.int64(), len(values), [bitmap, data], null_count=nulls)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _micros(moment: datetime) -> int:
    """Microseconds since the epoch; a naive time counts as UTC (as pyarrow takes it)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH) // _MICROSECOND


def estimated_bytes(row: ShardRow) -> int:
    """Rough uncompressed arrow size of one row (for sizing row groups)."""
    text = len(row.sample_id) + len(row.endpoint) + len(row.rid) + len(row.finish_reason)
    text += 2 * len(row.conversation_id or "") + 4
    if row.acceptance is not None:
        text += 4 * len(row.acceptance.get("histogram", ())) + 20
    return 4 * len(row.input_ids) + sum(len(f) + 4 for f in row.flags) + text + 64
