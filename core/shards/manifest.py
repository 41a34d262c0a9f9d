"""``manifest.json``: a batch's config, its complete shards and its counts.

The manifest is the only list of shards that resume and readers trust: a shard is
complete when it is listed here and its file still has the listed sha256. It is replaced
atomically (temp file, fsync, ``os.replace``, fsync of the directory), so a crash leaves
either the old or the new manifest, never a torn one.

Counts: ``done`` and ``flagged`` are rows in listed shards (kept by the shard writer);
``failed`` (generations given up on) and ``rejected`` (prompt records refused) are set by
the capture engine. ``extra`` is free space for the engine (state, presets, ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.fsio import fsync_dir, write_atomic

MANIFEST_NAME = "manifest.json"
SHARDS_DIR = "shards"
MANIFEST_VERSION = 1


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """What must not change between a batch's runs for its shards to belong together."""

    prompt_file: str
    prompt_sha256: str
    tokenizer_path: str
    tokenizer_fingerprint: str
    template_hash: str
    sampling: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def differences(self, other: BatchConfig) -> list[str]:
        """One human-readable line per field that differs (empty list: same config)."""
        lines = []
        for name in ("prompt_file", "prompt_sha256", "tokenizer_path",
                     "tokenizer_fingerprint", "template_hash", "sampling", "extra"):
            mine, theirs = _comparable(getattr(self, name)), _comparable(getattr(other, name))
            if mine != theirs:
                lines.append(f"{name}: {mine} -> {theirs}")
        return lines

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**asdict(self), "sampling": dict(self.sampling), "extra": dict(self.extra)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchConfig:
        """Inverse of :meth:`to_json`."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One complete shard: file name (relative to ``shards/``), rows, checksum, size, ids."""

    name: str
    rows: int
    sha256: str
    bytes: int
    flagged: int
    first_sample_id: str
    last_sample_id: str


@dataclass(slots=True)
class Counts:
    """Rows done and flagged (in listed shards), generations failed, records rejected."""

    done: int = 0
    failed: int = 0
    flagged: int = 0
    rejected: int = 0


@dataclass(slots=True)
class Manifest:
    """A batch directory's manifest; ``out_dir`` is where it lives (not stored in the file)."""

    out_dir: Path
    config: BatchConfig
    shards: list[ShardInfo] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    extra: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=lambda: _now())
    updated_at: str = ""
    version: int = MANIFEST_VERSION

    @property
    def path(self) -> Path:
        """``out_dir / manifest.json``."""
        return self.out_dir / MANIFEST_NAME

    @property
    def shards_dir(self) -> Path:
        """``out_dir / shards``."""
        return self.out_dir / SHARDS_DIR

    @classmethod
    def load(cls, out_dir: str | Path) -> Manifest:
        """Read ``out_dir/manifest.json``; ConfigError when missing or unreadable."""
        directory = Path(out_dir)
        path = directory / MANIFEST_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls._from_json(directory, data)
        except FileNotFoundError as e:
            raise ConfigError(f"no manifest at {path}; is {directory} a batch directory?") from e
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"manifest {path} is unreadable ({type(e).__name__}: {e}); restore it or "
                "start a new batch directory"
            ) from e

    @classmethod
    def load_optional(cls, out_dir: str | Path) -> Manifest | None:
        """Like :meth:`load`, but None when there is no manifest file at all."""
        if not (Path(out_dir) / MANIFEST_NAME).exists():
            return None
        return cls.load(out_dir)

    def save_atomic(self) -> None:
        """Write the manifest atomically (creating ``out_dir``); OSError passes through."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.updated_at = _now()
        text = json.dumps(self.to_json(), indent=1, ensure_ascii=False, sort_keys=True)
        write_atomic(self.path, text.encode("utf-8"))
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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (what the file holds)."""
        return {
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "config": self.config.to_json(),
            "shards": [asdict(s) for s in self.shards],
            "counts": asdict(self.counts),
            "extra": self.extra,
        }

    @classmethod
    def _from_json(cls, out_dir: Path, data: Mapping[str, Any]) -> Manifest:
        return cls(
            out_dir=out_dir,
            config=BatchConfig.from_json(data["config"]),
            shards=[ShardInfo(**s) for s in data.get("shards", [])],
            counts=Counts(**data.get("counts", {})),
            extra=dict(data.get("extra", {})),
            created_at=str(data.get("created_at", "")),
            updated_at=str(data.get("updated_at", "")),
            version=int(data.get("version", MANIFEST_VERSION)),
        )


def _comparable(value: object) -> str:
    """Canonical text of a config value, so dict key order does not count as a change."""
    return json.dumps(value, sort_keys=True, default=str)


def _now() -> str:
    """Current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = [
    "MANIFEST_NAME",
    "SHARDS_DIR",
    "BatchConfig",
    "Counts",
    "Manifest",
    "ShardInfo",
]
