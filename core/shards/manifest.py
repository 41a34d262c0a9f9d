"""``manifest.json``: a batch's config, its complete shards and its counts.

The manifest is the only list of shards that resume and readers trust: a shard is
complete when it is listed here and its file still has the listed sha256. It is replaced
atomically (temp file, fsync, ``os.replace``, fsync of the directory), so a crash leaves
either the old or the new manifest, never a torn one.

Counts: ``done`` and ``flagged`` are rows in listed shards (kept by the shard writer);
``failed`` (generations given up on) and ``rejected`` (prompt records refused) are set by
the capture engine. ``extra`` is what the engine adds (final state, servers, presets).

Every part is a ``msgspec`` struct: the file is encoded from and decoded into the same
declarations, so a value of the wrong type (or an unknown state) makes the manifest
unreadable with the field named, rather than surprising resume later. Keys this version
does not know are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import MIB, fsync_dir, read_small, write_atomic
from eagle_tui.core.sample_ids import parse_slice
from eagle_tui.core.sampling import SamplingIdentity
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.wire import explain

MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 64 * MIB
"""Largest manifest read: a shard entry is ~300 bytes, so this is ~200,000 shards; a bigger
file is not a manifest (``/dev/zero`` behind a symlink is refused before this)."""


class IdentityExtra(msgspec.Struct, frozen=True):
    """The rest of a batch's identity: template arguments, boundary token ids, vocab size,
    and the held-out split's fraction (unset, and not written, when the batch declares none:
    docs/acceptance.md)."""

    template_kwargs: dict[str, object] = {}
    boundary_ids: dict[str, int | list[int] | None] = {}
    vocab_size: int | None = None
    held_out: float | UnsetType = UNSET


class TurnsIdentity(msgspec.Struct, frozen=True):
    """How a multi-turn batch regenerates conversations (``capture --turns all``)."""

    history: str = "dataset"
    on_divergence: str = "end"


class BatchConfig(msgspec.Struct, frozen=True):
    """What must not change between a batch's runs for its shards to belong together."""

    prompt_file: str
    prompt_sha256: str
    tokenizer_path: str
    tokenizer_fingerprint: str
    template_hash: str
    sampling: SamplingIdentity
    extra: IdentityExtra = msgspec.field(default_factory=IdentityExtra)
    # Unset for single-turn batches (the last assistant turn only): their manifests read and
    # write as before multi-turn capture existed.
    turns: TurnsIdentity | UnsetType = UNSET

    def differences(self, other: BatchConfig) -> list[str]:
        """One human-readable line per field that differs (empty list: same config).

        Values are compared as values (``0`` equals ``0.0``, key order does not count) and
        shown as canonical JSON.
        """
        lines = []
        for name in self.__struct_fields__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                lines.append(f"{name}: {_comparable(mine)} -> {_comparable(theirs)}")
        return lines


class ShardInfo(msgspec.Struct, frozen=True):
    """One complete shard: file name (relative to ``shards/``), rows, checksum, size, ids."""

    name: str
    rows: int
    sha256: str
    bytes: int
    flagged: int
    first_sample_id: str
    last_sample_id: str


class Counts(msgspec.Struct):
    """Rows done and flagged (in listed shards), generations failed, records rejected."""

    done: int = 0
    failed: int = 0
    flagged: int = 0
    rejected: int = 0


class WorkerRecord(msgspec.Struct, frozen=True):
    """One worker behind a router: what it served and which SGLang it ran. ``source`` says
    who told: ``worker`` (asked directly) or ``router`` (its worker list; no version)."""

    url: str
    model_path: str | None = None
    version: str | None = None
    source: str = "worker"


class RouterRecord(msgspec.Struct, frozen=True):
    """A router the batch sent through (rows name it as their endpoint) and its workers."""

    url: str
    workers: list[WorkerRecord] = []


class SchedulerRun(msgspec.Struct, frozen=True, omit_defaults=True):
    """One start of the batch by a scheduler (``capture --shard auto``): which scheduler,
    its job and task ids, the restart count it gave, the node, the variables that decided
    (``from``), and when it started. Unknown values are left out."""

    shard: str
    scheduler: str
    task_id: str
    node: str
    job_id: str | None = None
    restart_count: int | None = None
    evidence: str = msgspec.field(default="", name="from")
    started_at: str = ""


class ManifestExtra(msgspec.Struct, omit_defaults=True):
    """What the engine adds: how the last run ended, its servers and presets, the routers
    among them with their workers, the ``--shard`` slice it captured, each start by a
    scheduler (``--shard auto``; oldest first, a requeue adds one), the config changes a
    ``--force`` resume went past, and (multi-turn) the turns never generated per reason
    (only the keys that were set are written)."""

    state: BatchState | None = None
    servers: list[str] = []
    presets: list[str] = []
    routers: list[RouterRecord] = []
    partition: str | None = None
    scheduler_runs: list[SchedulerRun] = []
    forced_changes: list[str] = []
    # multi-turn: turns never generated because their conversation ended early, per reason
    turns_not_generated: dict[str, int] = {}

    def __post_init__(self) -> None:
        # Readers split and compare slices; one that is not I/N (an edited manifest) makes
        # the manifest unreadable with the field named, not a traceback in stats or export.
        if self.partition is not None:
            try:
                parse_slice(self.partition)
            except ValueError as e:
                raise ValueError(f"partition {e}") from None


class ManifestFile(msgspec.Struct):
    """``manifest.json`` as it is on disk (``Manifest`` adds where it lives).

    ``schema_version`` is the shard schema its shards use; a manifest without it (written
    before multi-turn capture, and kept that way when rewritten) is schema 1.
    ``acceptance_column`` (written only when true) says its shards carry the acceptance
    column; a batch begun before that keeps its shards without it, resumed or not.
    """

    config: BatchConfig
    shards: list[ShardInfo] = []
    counts: Counts = msgspec.field(default_factory=Counts)
    extra: ManifestExtra = msgspec.field(default_factory=ManifestExtra)
    created_at: str = ""
    updated_at: str = ""
    version: int = MANIFEST_VERSION
    schema_version: int | UnsetType = UNSET
    acceptance_column: bool | UnsetType = UNSET


_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(ManifestFile)


@dataclass(slots=True)
class Manifest:
    """A batch directory's manifest; ``out_dir`` is where it lives (not stored in the file)."""

    out_dir: Path
    config: BatchConfig
    shards: list[ShardInfo] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    extra: ManifestExtra = field(default_factory=ManifestExtra)
    created_at: str = field(default_factory=lambda: _now())
    updated_at: str = ""
    version: int = MANIFEST_VERSION
    schema_version: int = 1
    schema_version_absent: bool = False  # read from a manifest that did not say (schema 1)
    acceptance_column: bool = False

    @property
    def path(self) -> Path:
        """Where the manifest file is (``BatchDir.manifest``)."""
        return BatchDir(self.out_dir).manifest

    @property
    def shards_dir(self) -> Path:
        """Where its shards are (``BatchDir.shards``)."""
        return BatchDir(self.out_dir).shards

    @classmethod
    def load(cls, out_dir: str | Path) -> Manifest:
        """Read ``out_dir/manifest.json``; ConfigError when missing or unreadable."""
        directory = Path(out_dir)
        path = BatchDir(directory).manifest
        try:
            # never through a link: a batch directory's files are read as themselves
            data = _DECODER.decode(read_small(path, MANIFEST_MAX_BYTES, "manifest",
                                              follow=False))
        except FileNotFoundError as e:
            raise ConfigError(f"no manifest at {path}; is {directory} a batch directory?") from e
        except UnfitFile as e:
            raise ConfigError(f"{e}; restore the batch's manifest.json") from e
        except PermissionError as e:
            raise ConfigError(f"cannot read manifest {path}: permission denied; check its owner "
                              "and permissions (ls -l), or run as the user who captured it") from e
        except (OSError, msgspec.DecodeError, ConfigError) as e:
            detail = explain(e) if isinstance(e, msgspec.MsgspecError) else str(e)
            raise ConfigError(
                f"manifest {path} is unreadable ({type(e).__name__}: {detail}); restore it "
                "or start a new batch directory"
            ) from e
        absent = isinstance(data.schema_version, UnsetType)
        return cls(directory, data.config, data.shards, data.counts, data.extra,
                   data.created_at, data.updated_at, data.version,
                   1 if isinstance(data.schema_version, UnsetType) else data.schema_version,
                   absent, data.acceptance_column is True)

    @classmethod
    def load_optional(cls, out_dir: str | Path) -> Manifest | None:
        """Like :meth:`load`, but None when there is no manifest file at all."""
        if not BatchDir.of(out_dir).holds_batch():
            return None
        return cls.load(out_dir)

    def save_atomic(self) -> None:
        """Write the manifest atomically (creating ``out_dir``); OSError passes through."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.updated_at = _now()
        write_atomic(self.path, msgspec.json.format(self.to_json(), indent=1))
        fsync_dir(self.out_dir)

    def add_shard(self, info: ShardInfo) -> None:
        """List a complete shard and count its rows (in memory; call :meth:`save_atomic`)."""
        self.shards.append(info)
        self.counts.done += info.rows
        self.counts.flagged += info.flagged

    def remove_shard(self, name: str) -> None:
        """Unlist a shard and uncount its rows (in memory)."""
        for info in [s for s in self.shards if s.name == name]:
            self.shards.remove(info)
            self.counts.done -= info.rows
            self.counts.flagged -= info.flagged

    def to_json(self) -> bytes:
        """What the file holds (compact JSON, keys sorted)."""
        return _ENCODER.encode(ManifestFile(
            config=self.config, shards=self.shards, counts=self.counts, extra=self.extra,
            created_at=self.created_at, updated_at=self.updated_at, version=self.version,
            schema_version=UNSET if self.schema_version_absent else self.schema_version,
            acceptance_column=True if self.acceptance_column else UNSET))


def _comparable(value: object) -> str:
    """Canonical text of a config value (keys sorted)."""
    return json.dumps(msgspec.to_builtins(value), sort_keys=True)


def _now() -> str:
    """Current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = [
    "BatchConfig",
    "Counts",
    "IdentityExtra",
    "Manifest",
    "ManifestExtra",
    "ManifestFile",
    "RouterRecord",
    "ShardInfo",
    "TurnsIdentity",
    "WorkerRecord",
]
