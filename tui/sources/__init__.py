"""Where the views' data comes from: small interfaces over ``core`` clients.

A view talks only to the source it needs (``ServerFeed`` for a server, ``SampleSource``
for shards, ``CaptureControl`` for batches); the dashboard builds real ones over ``core``
and tests pass their own. Sources do the I/O and run in workers; widgets only see the
immutable snapshots they produce. Modules are imported lazily so the first paint does not
wait for httpx, psutil or pyarrow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eagle_tui.core.clock import Clock
from eagle_tui.tui.options import DashboardOptions

if TYPE_CHECKING:
    from eagle_tui.tui.sources.capture import CaptureControl
    from eagle_tui.tui.sources.server import ServerDiscovery, ServerFeed
    from eagle_tui.tui.sources.slurm import SlurmFollower
    from eagle_tui.tui.sources.tokenizers import TokenizerCache


@dataclass
class Sources:
    """Every data source the views use (built once per app). ``discovery`` finds servers
    on this host when none was named (the Server view adds a feed for each one found)."""

    servers: tuple[ServerFeed, ...] = ()
    discovery: ServerDiscovery | None = None
    capture: CaptureControl | None = None
    tokenizers: TokenizerCache | None = None
    shard_dirs: tuple[str, ...] = field(default_factory=tuple)
    slurm: SlurmFollower | None = None
    """The Slurm array job the Capture view follows (``--slurm-job``), if any."""


def default_sources(options: DashboardOptions, clock: Clock) -> Sources:
    """Real sources over ``core`` for ``options``."""
    from eagle_tui.tui.sources.server import ServerDiscovery, ServerFeed
    from eagle_tui.tui.sources.tokenizers import TokenizerCache

    return Sources(
        servers=tuple(ServerFeed(target, trust_workers=options.trust_router_workers)
                      for target in options.servers),
        discovery=ServerDiscovery() if not options.servers else None,
        capture=LazyCapture(),  # type: ignore[arg-type]
        tokenizers=TokenizerCache(options.tokenizer),
        shard_dirs=tuple(str(p) for p in options.shard_dirs),
        slurm=_slurm_follower(options),
    )


def _slurm_follower(options: DashboardOptions) -> SlurmFollower | None:
    if options.slurm_job is None:
        return None
    from eagle_tui.tui.sources.slurm import SlurmFollower

    return SlurmFollower(options.slurm_job, options.slurm_runs or (Path.cwd(),))


class LazyCapture:
    """``CaptureControl`` that builds the detached-batch control (``core.batches``, httpx)
    on first use, so the dashboard paints before those imports."""

    def __init__(self) -> None:
        self._real: CaptureControl | None = None

    def _get(self) -> CaptureControl:
        if self._real is None:
            from eagle_tui.tui.sources.batches import DetachedCapture

            self._real = DetachedCapture()
        return self._real

    def __getattr__(self, name: str) -> object:
        return getattr(self._get(), name)

    def close(self) -> None:
        """Close the real capture only if it was ever built."""
        if self._real is not None:
            self._real.close()
