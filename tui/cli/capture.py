"""``eagle-tui capture``: run a capture batch in the foreground, headless.

A live panel when stderr is a terminal, a progress line every ``--log-every`` seconds
otherwise, and a summary at the end. Ctrl-C (or SIGTERM) stops dispatching and lets
in-flight requests finish for ``--grace`` seconds before aborting them; a second one aborts
at once. Either way only complete shards are left and the manifest is updated.

Exit status (also in ``--help``):

    0  every row captured
    1  rows failed: the batch ran to its end, but some rows failed permanently or prompts
       were rejected (see failures.jsonl / rejects.jsonl; ``--resume`` retries the failures)
    2  refused to start: bad flags or URLs, unreadable files or tokenizer, the output
       directory held by another batch, not writable, or not safely ours (another user's,
       writable by others, a link at one of its file names), a changed config on resume;
       nothing was sent
    3  batch crashed: it stopped before the end (no usable server, disk full or another
       write error, an internal error); every saved row is safe and ``--resume`` continues
    130  interrupted (Ctrl-C) before every row was captured (143 for SIGTERM): the saved
       rows are safe and ``--resume`` continues, so ``capture … && export …`` does not
       export a partial batch

Errors are one line on stderr; an internal error's traceback goes to ``<out>/capture.log``.
With ``--detach``: 0 started, 2 refused, 3 the worker could not start, 4 another worker
holds ``--out`` (``batch_verbs.run_detached``).

``--shard auto`` (``auto/N``) takes the slice from the scheduler that started the process
(``core.capture.scheduler_env``) while the arguments are parsed, so an environment that names
no slice, or two, is an argparse error (one line, exit 2); under it ``--resume`` defaults to
``auto`` (a requeued task continues its directory) and ``--detach`` is refused.

The API key comes from ``$EAGLE_TUI_API_KEY`` or ``--api-key-file`` (never a flag: flags
show up in ``ps``); it is sent to the servers and written nowhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec import UNSET, UnsetType

from eagle_tui.core.argtypes import (
    Checked,
    DirIn,
    DirOut,
    FileIn,
    Number,
    Whole,
    seconds,
    shown,
)
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.config import (
    MAX_CONCURRENCY,
    CaptureConfig,
    RetryPolicy,
    temperature_presets,
)
from eagle_tui.core.capture.conversation import MultiTurn
from eagle_tui.core.capture.engine import CaptureEngine, CaptureSummary
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.capture.report import summary_text
from eagle_tui.core.capture.scheduler_env import (
    AutoShard,
    SchedulerSlice,
    parse_shard,
    slice_from_environment,
)
from eagle_tui.core.errors import ConfigError, EagleError
from eagle_tui.core.fsio import describe_os_error
from eagle_tui.core.logsetup import log_to_batch, remove_handlers
from eagle_tui.core.sampling import SamplingPreset, check_extra_sampling
from eagle_tui.core.sglang import API_KEY_ENV
from eagle_tui.core.sglang.apikey import read_api_key
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.batchdir.lock import OutputLock
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.tokenizer.boundaries import normalize_overrides
from eagle_tui.core.tokenizer.modelconfig import model_vocab_size
from eagle_tui.tui.cli.batch_verbs import add_detach_arguments, run_detached
from eagle_tui.tui.cli.capture_display import plain_progress, rich_progress
from eagle_tui.tui.options import server_url

log = logging.getLogger("eagle_tui.core.capture")

EXIT_OK, EXIT_ROWS_FAILED, EXIT_START_FAILED, EXIT_CRASHED = 0, 1, 2, 3

# Option limits (README, "Every option value is checked"): past one is a typo, not a plan.
MAX_NEW_TOKENS = 1 << 24
MAX_TEMPERATURE = 100.0
MAX_SEED = (1 << 63) - 1
MAX_TOKEN_ID = (1 << 31) - 1
MAX_RETRIES = 1000
MAX_SHARD_ROWS = 10_000_000
MAX_JSON_CHARS = 65536
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")

EXIT_HELP = """exit status:
  0  every row captured
  1  rows failed: the batch finished, some rows failed or prompts were rejected
     (failures.jsonl, rejects.jsonl; --resume retries the failures)
  2  refused to start: bad flags, URLs, files or tokenizer, output directory locked,
     not writable or not yours alone, changed config on --resume; nothing was sent
  3  batch crashed: stopped early (no usable server, disk full, internal error); saved
     rows are safe, --resume continues
  130  interrupted by Ctrl-C before every row was captured (143: SIGTERM); saved rows
     are safe, --resume continues
with --detach: 0 started, 2 refused, 3 the worker could not start, 4 --out is busy"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``capture`` verb's flags."""
    parser.epilog = EXIT_HELP
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    need = parser.add_argument_group("what to capture")
    need.add_argument("--prompts", type=FileIn("prompt file"), required=True,
                      help="JSONL (or .jsonl.gz, parquet) of records with 'messages' "
                           "or ShareGPT 'conversations', optional 'tools' and 'id'")
    need.add_argument("--out", type=DirOut("batch directory"), required=True,
                      help="batch directory (shards, "
                      "manifest.json, failures.jsonl, rejects.jsonl)")
    need.add_argument("--server", action="append", required=True, type=server_url, metavar="URL",
                      help="SGLang server URL; repeat for several (least-loaded first)")
    need.add_argument("--tokenizer", type=DirIn("tokenizer directory"), required=True,
                      help="the served model's tokenizer directory (local)")
    need.add_argument("--model-dir", type=Checked(model_config_dir),
                      help="model directory whose config.json gives the vocabulary size "
                           "(default: the tokenizer directory, else the largest token id)")
    need.add_argument("--held-out", type=Number(0, 1, above=True), default=None, metavar="FRACTION",
                      help="declare a held-out split: this share of prompts (chosen by "
                      "sample id) is captured but left out of export, for accept --from-batch")
    need.add_argument("--trust-remote-code", action="store_true",
                      help="allow the tokenizer's own code (Kimi's real tokenizer needs it)")
    _turn_arguments(parser.add_argument_group("multi-turn conversations"))
    _sampling_arguments(parser.add_argument_group("sampling"))
    _run_arguments(parser.add_argument_group("running"))
    add_detach_arguments(parser.add_argument_group("detached batches"))


def _turn_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--turns", choices=("last", "all"), default="last",
                       help="last: regenerate the conversation's last assistant turn (one row "
                       "per record); all: every assistant turn, one row each (default: last)")
    group.add_argument("--history", choices=("dataset", "model"), default="dataset",
                       help="with --turns all: the earlier turns in each prompt are the "
                       "dataset's (dataset) or the model's own answers, parsed from its output "
                       "ids (model) (default: dataset)")
    group.add_argument("--on-divergence", choices=("end", "dataset"), default="end",
                       help="with --history model, when the model's tool calls differ from the "
                       "dataset's: end the conversation there (end) or keep the dataset's call "
                       "and its results in the history and go on (dataset); either way the row "
                       "is flagged tool_call_diverged (default: end)")


def _sampling_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--max-new-tokens", type=Whole(1, MAX_NEW_TOKENS), default=4096)
    group.add_argument("--temperature", type=Number(0, MAX_TEMPERATURE), action="append",
                       metavar="T", help="repeat for one row per temperature (sample ids get "
                       "#t<T>)")
    group.add_argument("--top-p", type=Number(0, 1, above=True), default=1.0)
    group.add_argument("--top-k", type=Checked(_top_k), default=-1, help="-1 (all) or >= 1")
    group.add_argument("--min-p", type=Number(0, 1), default=0.0)
    group.add_argument("--seed", type=Whole(0, MAX_SEED),
                       help="sampling_seed sent with every request")
    group.add_argument("--sampling-param", action="append", default=[], metavar="KEY=JSON",
                       type=Checked(sampling_param),
                       help="extra SGLang sampling_params entry, e.g. repetition_penalty=1.05")
    group.add_argument("--template-kwarg", action="append", default=[], metavar="KEY=JSON",
                       type=Checked(key_json), help="chat-template keyword, e.g. thinking=false")
    group.add_argument("--boundary", action="append", default=[], metavar="NAME=ID",
                       type=Checked(_boundary),
                       help="override a boundary token id (think, think_end, stop, ...)")


def _run_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--concurrency", type=Whole(1, MAX_CONCURRENCY), default=64,
                       help=f"requests in flight per server (default 64, at most "
                            f"{MAX_CONCURRENCY})")
    group.add_argument("--timeout", type=seconds(), default=1800.0,
                       help="seconds per request before it is aborted and retried")
    group.add_argument("--retries", type=Whole(1, MAX_RETRIES), default=6,
                       help="attempts per row before it fails (transient errors only)")
    group.add_argument("--shard-rows", type=Whole(1, MAX_SHARD_ROWS), default=2000)
    group.add_argument("--grace", type=seconds(zero=True), default=30.0,
                       help="seconds in-flight requests get to finish after Ctrl-C")
    group.add_argument("--health-interval", type=seconds(), default=10.0)
    group.add_argument("--server-down-limit", type=seconds(), default=1800.0,
                       help="give up when no server has been healthy this many seconds")
    group.add_argument("--shard", metavar="I/N|auto[/N]", type=Checked(shard_option),
                       help="capture only slice I (0-based) of N of the prompts, by sample id: "
                            "N batches (on N nodes) with 0/N..N-1/N split one job; auto: the "
                            "slice from the scheduler that started this process (Slurm array "
                            "task, Kubernetes Indexed Job, torchrun, mpirun), auto/N with N "
                            "slices; a restarted task resumes its --out")
    group.add_argument("--resume", nargs="?", choices=("auto", "no"), const="auto",
                       metavar="auto|no",
                       help="continue the batch in --out (skip done rows, retry failures "
                            "except prompts too long for the context); an empty --out starts "
                            "it. Default: no, except under --shard auto (a requeued task "
                            "continues its slice); --resume no refuses an --out that holds "
                            "a batch")
    group.add_argument("--retry-failed", action="store_true",
                       help="with --resume: also resend the rows that failed as too long "
                            "for the context (after raising the server's context length)")
    group.add_argument("--force", action="store_true",
                       help="with --resume: accept a changed prompt file/tokenizer/sampling")
    group.add_argument("--trust-router-workers", action="store_true",
                       help="through SGLang's router: also ask the workers it lists directly "
                            "(health, load, model, abort), sending them the API key; without "
                            "it only the URLs you name are contacted")
    group.add_argument("--api-key-file", type=FileIn("API key file"),
                       help=f"file holding the API key (default: ${API_KEY_ENV})")
    group.add_argument("--display", choices=("auto", "rich", "plain"), default="auto",
                       help="live panel or log lines (auto: panel on a terminal)")
    group.add_argument("--log-every", type=seconds(), default=30.0,
                       help="seconds between plain progress lines")


def shard_option(text: str) -> Partition | SchedulerSlice:
    """``--shard``'s argparse type: ``I/N``, or ``auto``/``auto/N`` resolved from this
    process's environment. A bad value or an environment that names no slice (or two)
    is an argparse error: one line, exit status 2, nothing started."""
    try:
        shard = parse_shard(text)
        if isinstance(shard, AutoShard):
            return slice_from_environment(shard, os.environ)
        return shard
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--shard ")) from None


def run(args: argparse.Namespace) -> int:
    """Run the batch described by ``args``; the exit status (see the module docstring)."""
    try:
        config = config_from_args(args)
    except (EagleError, ValueError, OSError) as e:
        return _say(e, EXIT_START_FAILED)
    if args.detach:
        if isinstance(args.shard, SchedulerSlice):
            return _say("--shard auto runs in the foreground: the scheduler ends a task's "
                        "processes when its script exits, and restarts the task itself; "
                        "drop --detach", EXIT_START_FAILED)
        return run_detached(config, name=args.name)
    try:
        lock = OutputLock(config.out_dir).acquire()
        handlers = log_to_batch(BatchDir(config.out_dir).capture_log)
    except EagleError as e:  # a detached worker or another capture writes there already
        return _say(e, EXIT_START_FAILED)
    except OSError as e:
        return _say(f"cannot use {config.out_dir}: {describe_os_error(e)}; choose another "
                    "--out or fix the directory", EXIT_START_FAILED)
    with lock:
        try:
            return _run_in_foreground(config, args)
        finally:
            remove_handlers(handlers)


def _run_in_foreground(config: CaptureConfig, args: argparse.Namespace) -> int:
    try:
        ended = asyncio.run(_capture(config, args))
    except EagleError as e:  # raised before the first request: the batch did not start
        return _say(e, EXIT_START_FAILED)
    except Exception as e:  # a bug or an unforeseen failure: one line here, details in the log
        log.error("the capture crashed", exc_info=e, extra={"file_only": True})
        return _say(f"the batch crashed ({type(e).__name__}: {terminal_safe(str(e))[:300]}); "
                    f"the traceback is in {BatchDir(config.out_dir).capture_log}; saved rows are "
                    "safe and --resume continues", EXIT_CRASHED)
    print(terminal_safe(summary_text(ended.summary), multiline=True), file=sys.stderr)
    return ended.exit_code()


@dataclass(frozen=True)
class _Ended:
    """How a foreground run ended, and the first stop signal it received (if any)."""

    summary: CaptureSummary
    signal: int | None

    def exit_code(self) -> int:
        """The summary's code, or 128 + the signal (130 for Ctrl-C, as shells expect) when
        a signal stopped the batch before every row was captured."""
        summary = self.summary
        if self.signal is None or summary.state != BatchState.STOPPED:
            return summary.exit_code
        return summary.exit_code if _all_captured(summary) else 128 + self.signal


def _all_captured(summary: CaptureSummary) -> bool:
    return summary.progress.counts.remaining == 0


def _say(message: object, code: int) -> int:
    """Print one error line (control characters made visible); return ``code``."""
    print(f"eagle-tui capture: {terminal_safe(str(message))}", file=sys.stderr)
    return code


def config_from_args(args: argparse.Namespace) -> CaptureConfig:
    """A checked CaptureConfig from parsed flags (ConfigError/ValueError when wrong)."""
    common: dict[str, Any] = {"top_p": args.top_p, "top_k": args.top_k, "min_p": args.min_p,
                              "seed": args.seed}
    temperatures = tuple(args.temperature or [1.0])
    presets: tuple[SamplingPreset, ...] = temperature_presets(temperatures, **common)
    return CaptureConfig(
        prompts=args.prompts, out_dir=args.out,
        servers=tuple(args.server),
        tokenizer=args.tokenizer, model_dir=args.model_dir,
        trust_remote_code=args.trust_remote_code, max_new_tokens=args.max_new_tokens,
        presets=presets, extra_sampling=dict(args.sampling_param),
        template_kwargs=dict(args.template_kwarg), boundary_overrides=dict(args.boundary),
        concurrency=args.concurrency, request_timeout_s=args.timeout,
        retry=RetryPolicy(max_attempts=args.retries), health_interval_s=args.health_interval,
        server_down_limit_s=args.server_down_limit, stop_grace_s=args.grace,
        shard_rows=args.shard_rows, resume=resume_wanted(args), force=args.force,
        trust_router_workers=args.trust_router_workers or UNSET,
        retry_failed=args.retry_failed, partition=_partition(args.shard), turns=_turns(args),
        api_key=_api_key(args.api_key_file) or UNSET,
        held_out=UNSET if args.held_out is None else args.held_out,
    )


def resume_wanted(args: argparse.Namespace) -> bool:
    """``--resume`` (``auto``) continues the batch in --out; without it, only a slice from
    a scheduler does, because a requeued task runs the same command again."""
    if args.resume is None:
        return isinstance(args.shard, SchedulerSlice)
    return bool(args.resume == "auto")


def _partition(shard: Partition | SchedulerSlice | None) -> Partition | UnsetType:
    """The config's slice: unset for the whole prompt set."""
    if shard is None:
        return UNSET
    return shard.partition if isinstance(shard, SchedulerSlice) else shard


def _turns(args: argparse.Namespace) -> MultiTurn | UnsetType:
    """The multi-turn settings (unset for --turns last, today's single-turn capture)."""
    if args.turns == "last":
        if args.history == "model":
            raise ConfigError("--history model needs --turns all: the model's earlier answers "
                              "exist only when every turn is generated")
        return UNSET
    return MultiTurn(args.history, args.on_divergence)


def key_json(item: str) -> tuple[str, Any]:
    """A ``KEY=JSON`` option value as ``(key, value)``. A value that is not JSON is taken as
    a string (``stop=</s>``), unless it starts like JSON (``{ [ "``): then it was meant as
    JSON and is refused, as is an empty value, rather than sent to fail on every row."""
    key, sep, raw = item.partition("=")
    if not sep or not _KEY.match(key):
        raise ValueError(f"{shown(item)} is not KEY=VALUE with KEY a name, e.g. "
                         "repetition_penalty=1.05")
    if not raw.strip():
        raise ValueError(f"{key}= has no value; give KEY=JSON, e.g. {key}=1.05")
    if len(raw) > MAX_JSON_CHARS:
        raise ValueError(f"the value of {key} is longer than {MAX_JSON_CHARS} characters")
    try:
        return key, json.loads(raw)
    except RecursionError:
        raise ValueError(f"the value of {key} is nested too deeply") from None
    except ValueError as e:
        if raw.lstrip()[:1] in ("{", "[", '"'):
            raise ValueError(f"the value of {key} is not valid JSON ({e})") from None
        return key, raw


def sampling_param(item: str) -> tuple[str, Any]:
    """A ``--sampling-param KEY=JSON`` value; a key SGLang knows must have its type
    (``temperature="x"`` would make every request a 400)."""
    key, value = key_json(item)
    check_extra_sampling({key: value})
    return key, value


def model_config_dir(text: str) -> Path:
    """A ``--model-dir``: a directory whose ``config.json`` gives the vocabulary size (one
    without would be ignored silently, the bound then taken from elsewhere)."""
    path = DirIn("model directory")(text)
    model_vocab_size(path)
    return path


def _boundary(item: str) -> tuple[str, int]:
    """A ``--boundary NAME=ID`` value, the name and id checked as a config's would be."""
    name, sep, raw = item.partition("=")
    if not sep:
        raise ValueError(f"{shown(item)} is not NAME=ID, e.g. think_end=163607")
    token_id = Whole(0, MAX_TOKEN_ID, "a token id")(raw)
    normalize_overrides({name: token_id})
    return name, token_id


def _top_k(text: str) -> int:
    value = Whole(-1, MAX_TOKEN_ID)(text)
    if value == 0:
        raise ValueError("0 is not a top-k; give -1 (all tokens) or a number >= 1")
    return value


def _api_key(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get(API_KEY_ENV) or None
    return read_api_key(path)


async def _capture(config: CaptureConfig, args: argparse.Namespace) -> _Ended:
    scheduler = args.shard if isinstance(args.shard, SchedulerSlice) else None
    if scheduler is not None:
        print(f"eagle-tui capture: {terminal_safe(scheduler.describe())}", file=sys.stderr)
    engine = CaptureEngine(config, scheduler=scheduler)
    signals = _install_signal_handlers(engine, config.stop_grace_s)
    display = asyncio.ensure_future(_show_progress(engine, args))
    try:
        return _Ended(await engine.run(), signals[0] if signals else None)
    finally:
        display.cancel()
        await asyncio.gather(display, return_exceptions=True)


async def _show_progress(engine: CaptureEngine, args: argparse.Namespace) -> None:
    use_rich = args.display == "rich" or (args.display == "auto" and sys.stderr.isatty())
    if use_rich:
        from rich.console import Console

        await rich_progress(engine.progress, Console(stderr=True))
    else:
        await plain_progress(engine.progress, args.log_every, sys.stderr)


def _install_signal_handlers(engine: CaptureEngine, grace_s: float) -> list[int]:
    """First SIGINT/SIGTERM: drain for ``grace_s``; the second: abort now. The signals
    received, in order (filled as they arrive)."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) == 1:
            log.warning("%s: stopping; in-flight requests get %gs to finish "
                        "(send it again to abort them now)", name, grace_s)
            engine.stop()
        else:
            log.warning("%s again: aborting in-flight requests now", name)
            engine.stop(abort=True)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    return received
