"""``eagle-tui`` with no verb: the dashboard.

Options come from the command line, then the environment (``EAGLE_TUI_THEME``), then
``<config dir>/config.toml`` (a ``[tui]`` table: ``theme``, ``readonly``, ``mouse``,
``tokenizer``, ``view``, ``refresh``; see ``TuiConfig``), then defaults. Everything is
checked before the app takes the terminal (a value of the wrong type, such as
``readonly = "false"``, is an error naming the file and the key, not a truthy string); once
it runs, nothing is printed (logging goes to ``<state dir>/logs/tui.log``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from eagle_tui.core.argtypes import (
    Checked,
    DirIn,
    FileFollowed,
    FileOut,
    Number,
    OneLineParser,
    PathIn,
    Whole,
    shown,
)
from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import MIB, read_small
from eagle_tui.core.paths import config_dir
from eagle_tui.core.urls import ServerURL
from eagle_tui.core.wire import where_what
from eagle_tui.tui.options import (
    VIEWS,
    DashboardOptions,
    ServerTarget,
    server_url,
    slurm_job_id,
)

EXIT_USAGE = 2
MAX_PID = 1 << 22  # Linux's pid_max ceiling
MAX_CONFIG_BYTES = MIB


class TuiConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[tui]`` table of ``config.toml``: every key optional, types checked; keys this
    version does not know are ignored."""

    theme: str | None = None
    readonly: bool | None = None
    mouse: bool | None = None
    tokenizer: str | None = None
    view: str | None = None
    refresh: float | None = None


MIN_REFRESH_S, MAX_REFRESH_S = 0.1, 60.0
_HINTS = {
    "theme": "a theme name in quotes, e.g. theme = \"eagle-light\"",
    "readonly": "true or false, without quotes",
    "mouse": "true or false, without quotes",
    "tokenizer": "a directory in quotes, e.g. tokenizer = \"~/models/kimi\"",
    "view": f"one of {', '.join(VIEWS)} in quotes",
    "refresh": f"seconds between redraws, a number from {MIN_REFRESH_S:g} to {MAX_REFRESH_S:g}",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard's options."""
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        type=server_url,
        metavar="URL",
        help="an SGLang server to watch (repeat for several)",
    )
    parser.add_argument(
        "--log",
        action="append",
        default=[],
        type=FileFollowed("server's log file"),
        metavar="FILE",
        help="log file of the server given by the --url in the same position",
    )
    parser.add_argument(
        "--pid",
        action="append",
        default=[],
        type=Whole(1, MAX_PID, "a process id"),
        metavar="PID",
        help="main process of the server given by the --url in the same position",
    )
    parser.add_argument(
        "--shards",
        action="append",
        default=[],
        type=PathIn("batch or shard directory"),
        metavar="DIR",
        help="batch or shard directory to open in the Inspect view (repeat it for the "
             "--shard slices of one job, read as one); with no --url the dashboard opens "
             "on it",
    )
    parser.add_argument(
        "--tokenizer",
        type=DirIn("tokenizer directory"),
        metavar="DIR",
        help="tokenizer directory for decoding (default: the one in the shards)",
    )
    parser.add_argument("--theme", type=Checked(theme_name),
                        help="theme name (eagle-dark, eagle-light, ansi-dark, …)")
    parser.add_argument("--view", choices=VIEWS, help="view to open first")
    parser.add_argument(
        "--readonly",
        action="store_true",
        default=None,
        help="hide every action that starts, stops or changes anything",
    )
    parser.add_argument(
        "--no-mouse",
        action="store_true",
        default=None,
        help="leave the mouse to the terminal (native copy and paste)",
    )
    parser.add_argument(
        "--trust-router-workers",
        action="store_true",
        help="ask the workers a router lists directly (a card each), sending them the API "
             "key; without it only the URLs you name are contacted",
    )
    parser.add_argument("--slurm-job", metavar="ID", type=Checked(slurm_job_id),
                        help="follow this Slurm array of capture --shard auto in the Capture "
                             "view as one job (squeue, and the slice directories under --runs)")
    parser.add_argument("--runs", metavar="DIR", type=DirIn("slice directory"), action="append",
                        default=[], help="with --slurm-job: a slice directory, or the "
                        "directory holding them (repeat; default: the current directory)")
    add_refresh_argument(parser)
    parser.add_argument("--log-file", type=FileOut("log file"),
                        help="where eagle-tui logs (default: state dir)")
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )


def add_refresh_argument(parser: argparse.ArgumentParser) -> None:
    """``--refresh SECONDS`` (the dashboard's and the demo's)."""
    parser.add_argument(
        "--refresh",
        type=refresh_seconds,
        metavar="SECONDS",
        help="seconds between redraws of live data (default 1; raise it on a slow link; "
        "keys are answered at once whatever it is)",
    )


refresh_seconds = Number(MIN_REFRESH_S, MAX_REFRESH_S, what="seconds")
"""A ``--refresh`` value, checked."""

_THEME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


def theme_name(text: str) -> str:
    """A ``--theme`` value: a name (whether such a theme exists is known once themes load)."""
    if not _THEME_NAME.match(text):
        raise ValueError(f"{shown(text)} is not a theme name (letters, digits and _.+-, e.g. "
                         "eagle-light)")
    return text


def run(args: argparse.Namespace) -> int:
    """Start the dashboard; returns the exit code."""
    try:
        options = options_from(args, read_config(), os.environ)
    except ConfigError as exc:
        print(f"eagle-tui: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_dashboard(options, log_file=args.log_file, log_level=args.log_level)


def run_dashboard(
    options: DashboardOptions, *, log_file: Path | None = None, log_level: str = "INFO"
) -> int:
    """Configure logging, run the app until it quits; returns its exit code."""
    from eagle_tui.core.logsetup import log_to_file
    from eagle_tui.tui.app import EagleApp

    try:
        log_to_file(log_file, log_level)
    except OSError as exc:
        print(f"eagle-tui: cannot write the log file: {exc}", file=sys.stderr)
        return EXIT_USAGE
    app = EagleApp(options)
    app.run(mouse=options.mouse)
    return app.return_code or 0


def read_config(path: Path | None = None) -> TuiConfig:
    """The ``[tui]`` table of the config file (all unset when there is none); ConfigError
    naming the file and the key when a value has the wrong type."""
    path = path or config_dir() / "config.toml"
    try:
        data = tomllib.loads(read_small(path, MAX_CONFIG_BYTES, "config file").decode("utf-8"))
    except FileNotFoundError:
        return TuiConfig()
    except UnfitFile as exc:
        raise ConfigError(f"{exc}; fix or remove it") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is unreadable: {exc}; fix or remove it") from exc
    table = data.get("tui", {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [tui] must be a table")
    try:
        config = msgspec.convert(table, TuiConfig)
    except msgspec.ValidationError as exc:
        key, problem = where_what(exc)
        hint = _HINTS.get(key, "fix or remove it")
        raise ConfigError(f"config file {path}: [tui] {key}: {problem}; it takes {hint}"
                          ) from exc
    if config.view is not None and config.view not in VIEWS:
        raise ConfigError(f"config file {path}: [tui] view: unknown view {config.view!r}; "
                          f"it takes {_HINTS['view']}")
    if config.refresh is not None and not MIN_REFRESH_S <= config.refresh <= MAX_REFRESH_S:
        raise ConfigError(f"config file {path}: [tui] refresh: {config.refresh:g} is out of "
                          f"range; it takes {_HINTS['refresh']}")
    return config


def options_from(
    args: argparse.Namespace, config: TuiConfig, env: Mapping[str, str]
) -> DashboardOptions:
    """Merge command line > environment > config file > defaults."""
    theme = config.theme if config.theme is not None else "eagle-dark"
    if getattr(args, "runs", None) and getattr(args, "slurm_job", None) is None:
        raise ConfigError("--runs goes with --slurm-job ID")
    return DashboardOptions(
        servers=server_targets(args.url, args.log, args.pid),
        shard_dirs=tuple(args.shards),
        tokenizer=args.tokenizer or _optional_path(config.tokenizer),
        theme=args.theme or env.get("EAGLE_TUI_THEME") or theme,
        readonly=_first_bool(args.readonly, config.readonly, default=False),
        mouse=not _first_bool(args.no_mouse, _negate(config.mouse), default=False),
        start_view=_view(args.view or _asked_view(args) or config.view or "server"),
        refresh_s=_first_float(getattr(args, "refresh", None), config.refresh, default=1.0),
        trust_router_workers=bool(getattr(args, "trust_router_workers", False)),
        slurm_job=getattr(args, "slurm_job", None),
        slurm_runs=tuple(getattr(args, "runs", ())),
    )


def _asked_view(args: argparse.Namespace) -> str | None:
    """The view the command line's targets ask for (it wins over the config file's
    ``view``): Capture when following a Slurm job, Inspect when only ``--shards`` names
    something (no server given: host-wide discovery would answer a question nobody
    asked); None otherwise."""
    if getattr(args, "slurm_job", None):
        return "capture"
    if args.shards and not (args.url or args.log or args.pid):
        return "inspect"
    return None


def server_targets(
    urls: Sequence[ServerURL], logs: Sequence[Path], pids: Sequence[int] = ()
) -> tuple[ServerTarget, ...]:
    """One target per URL; the n-th ``--log`` and ``--pid`` belong to the n-th ``--url``.
    With no ``--url`` the dashboard finds the servers on this host itself."""
    if len(logs) > len(urls):
        raise ConfigError(f"{len(logs)} --log files for {len(urls)} --url servers; pair them up")
    if len(pids) > len(urls):
        raise ConfigError(f"{len(pids)} --pid values for {len(urls)} --url servers; pair them up")
    logs_ = list(logs) + [None] * (len(urls) - len(logs))
    pids_ = list(pids) + [None] * (len(urls) - len(pids))
    return tuple(
        ServerTarget(url, log_file=log, pid=pid)
        for url, log, pid in zip(urls, logs_, pids_, strict=True)
    )


def _view(name: object) -> str:
    if name not in VIEWS:
        raise ConfigError(f"unknown view {name!r}; use one of {', '.join(VIEWS)}")
    return str(name)


def _optional_path(value: object) -> Path | None:
    return Path(str(value)).expanduser() if value else None


def _negate(value: object) -> bool | None:
    return None if value is None else not bool(value)


def _first_float(*values: float | None, default: float) -> float:
    return next((value for value in values if value is not None), default)


def _first_bool(*values: object, default: bool) -> bool:
    for value in values:
        if value is not None:
            return bool(value)
    return default


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m eagle_tui.tui.dashboard``."""
    parser = OneLineParser(prog="eagle-tui", description="The eagle-tui dashboard.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
