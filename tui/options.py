"""What the dashboard was asked to show and how: servers, shard directories, theme, modes.

Built once by ``tui.dashboard`` (command line > environment > config file > defaults) and
handed to the app; nothing here changes while the app runs. ``server_url`` is the argparse
type of every option that takes a server URL, the dashboard's and the verbs'.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from eagle_tui.core.errors import BadURL
from eagle_tui.core.urls import ServerURL, argument_error

VIEWS: tuple[str, ...] = ("server", "capture", "streams", "inspect", "fleet")
VIEW_TITLES: dict[str, str] = {
    "server": "Server",
    "capture": "Capture",
    "streams": "Streams",
    "inspect": "Inspect",
    "fleet": "Fleet",
}


@dataclass(frozen=True)
class ServerTarget:
    """One server to watch: its URL, and its log file and launch command when known.

    ``argv`` is set in managed mode (eagle-tui launched the server and may restart or stop
    it); ``pid`` names an already-running server process to probe.
    """

    url: ServerURL
    name: str = ""
    log_file: Path | None = None
    argv: tuple[str, ...] = ()
    pid: int | None = None
    quiet: bool = False
    """Listed but never toasted: another user's server found by discovery (not ours to
    act on; its troubles are shown on its card only)."""

    @property
    def label(self) -> str:
        """``name`` or ``host:port`` of the URL."""
        return self.name or self.url.label

    @property
    def managed(self) -> bool:
        """True when eagle-tui owns the server's process (restart and stop are offered)."""
        return bool(self.argv)


@dataclass(frozen=True)
class DashboardOptions:
    """Everything the dashboard needs to start. ``readonly`` hides every mutating action."""

    servers: tuple[ServerTarget, ...] = ()
    shard_dirs: tuple[Path, ...] = ()
    tokenizer: Path | None = None
    theme: str = "eagle-dark"
    readonly: bool = False
    mouse: bool = True
    start_view: str = "server"
    refresh_s: float = 1.0
    """How often data-driven parts are redrawn (``--refresh``); keys are answered at once."""
    extra_theme_dirs: tuple[Path, ...] = field(default_factory=tuple)
    trust_router_workers: bool = False
    """Ask a router's listed workers directly (a card each), sending them the API key."""
    slurm_job: str | None = None
    """A Slurm array of ``capture --shard auto`` tasks the Capture view follows as one job."""
    slurm_runs: tuple[Path, ...] = ()
    """Where its slice directories are (each one, or a directory holding them)."""


def server_url(text: str) -> ServerURL:
    """The argparse ``type`` of every option that takes a server URL (``--url``,
    ``--server``, ``--router-metrics``): argparse turns the error into one line naming the
    option (``argument --url: 'http://h:9/': has a query string…``) and exit status 2."""
    try:
        return ServerURL.parse(text)
    except BadURL as e:
        raise argparse.ArgumentTypeError(argument_error(text, str(e))) from None


def slurm_job_id(text: str) -> str:
    """``--slurm-job``'s type (``batches`` and the dashboard): an array's job id (digits;
    ``812`` of ``812_3``)."""
    job = text.strip()
    if not job.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: want the array's job id, e.g. 812 "
                                         "(sbatch --parsable prints it)")
    return job
