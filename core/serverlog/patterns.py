"""The one table of SGLang log patterns (SGLang 0.5.23; a real log is
tests/fixtures/realsrv/server_startup.log).

``RULES`` is tried in order and the first match wins: the ``server_args`` line first (it is
long and quotes flag names such as ``enable_nccl_nvls``), then the fatal patterns (a line
saying "CUDA out of memory" must never pass for progress), then start-up and run-time
lines. A rule searches the message after the ``[timestamp ranks]`` prefix (``scope
"message"``) or the whole line (``"text"``: tracebacks and tqdm bars have no prefix), and
turns its match into a typed event from ``core.serverlog.events``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.serverargs import extract_server_args

Builder = Callable[[re.Match[str], ev.LogLine], ev.LogEvent]
Scope = Literal["message", "text"]

# [2026-11-30 02:28:44 TP3] message    (milliseconds with SGLANG_LOG_MS)
PREFIX = re.compile(
    r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?(.*)$",
    re.DOTALL,
)


@dataclass(frozen=True)
class Rule:
    """One pattern: a name (used in tests and docs), its regex, what it builds, where it looks."""

    name: str
    regex: re.Pattern[str]
    build: Builder
    scope: Scope = "message"


def rule(name: str, pattern: str, build: Builder, scope: Scope = "message", flags: int = 0) -> Rule:
    """A ``Rule`` with its pattern compiled."""
    return Rule(name, re.compile(pattern, flags), build, scope)


def _opt_float(value: str | None) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: str | None) -> int | None:
    return None if value is None else int(value)


def fatal(kind: str, exit_group: int | None = None) -> Builder:
    """A builder of ``Fatal(kind)``, reading the exit code from ``exit_group`` if given."""

    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        code = int(m[exit_group]) if exit_group is not None else None
        return ev.Fatal(line, kind, exit_code=code)

    return build


def _server_args(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ServerArgsSeen(line, extract_server_args(line.message))


def _weight_begin(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.WeightLoadBegin(line, float(m[1]))


def _shards(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ShardProgress(line, int(m[1]), int(m[2]), int(m[3]))


def _weight_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.WeightLoadEnd(line, _opt_float(m[1]), m[2], float(m[3]), float(m[4]))


def _kv(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    size = float(m[4]) if m[4] else float(m[2] or 0) + float(m[3] or 0)
    return ev.KvCacheAllocated(line, tokens=int(m[1]), size_gb=size)


def _pool_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.MemoryPoolEnd(line, float(m[1]))


def _graphs_off(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphsDisabled(line)


def _graph_begin(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureBegin(line, m["stage"] or "")


def _graph_bar(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureProgress(
        line, int(m[1]), float(m[2]), int(m[3]), _opt_int(m[4]), _opt_int(m[5])
    )


def _graph_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureEnd(line, m["stage"] or "", float(m["elapsed"]))


def _sched_info(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.SchedulerLimits(line, int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]))


def _uv_start(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ServerProcessStarted(line, int(m[1]))


def _uv_app(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.AppStartupComplete(line)


def _uv_bind(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.PortBound(line, m[1], m[2], int(m[3]))


def _ready(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ServerReady(line)


def _sigterm(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.Shutdown(line)


def _draining(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.Shutdown(line, int(m[1]))


def _access(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.HttpAccess(line, m[1], m[2], int(m[3]))


def _batch(kind: str) -> Builder:
    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        return ev.BatchStats(
            line,
            kind=kind,
            running=int(m["running"]),
            queued=_opt_int(m["queued"]),
            throughput=_opt_float(m["throughput"]),
            token_usage=_opt_float(m["usage"]),
        )

    return build


def _traceback(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.TracebackStart(line)


_GRAPH = r"Capture (?:(?P<stage>(?:target|draft) (?:decode|verify|prefill|extend)) )?(?:cuda|CUDA)"
_NCCL = (
    r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError"
    r"|Watchdog caught collective operation timeout|DistBackendError"
)

ARGS_RULES: tuple[Rule, ...] = (rule("ARGS", r"^server_args=(?:ServerArgs\(|\{)", _server_args),)

FATAL_RULES: tuple[Rule, ...] = (
    rule(
        "CUDA_OOM",
        r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory",
        fatal("oom"),
        "text",
    ),
    rule(
        "NOT_ENOUGH_MEM",
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        fatal("oom"),
        "text",
    ),
    rule(
        "ADDR_IN_USE",
        r"\[Errno 98\].*address already in use",
        fatal("address_in_use"),
        "text",
        re.IGNORECASE,
    ),
    rule(
        "PORT_INTERNAL",
        r"Port is already in use\.|\b\w{1,64} at \d+ is not available in \d+ seconds",
        fatal("port_in_use"),
        "text",
    ),
    rule("NCCL", _NCCL, fatal("nccl"), "text"),
    rule("GRAPH_FAIL", r"Capture (?:cuda|CUDA) graph failed", fatal("graph_capture_failed")),
    rule("WATCHDOG", r"watchdog timeout \(self\.watchdog_timeout=", fatal("watchdog_timeout")),
    rule(
        "RANK_DIED",
        r"Rank (\d+) scheduler died during initialization \(exit code: (-?\d+)\)",
        fatal("rank_died", exit_group=2),
    ),
    rule(
        "SUBPROC_CRASH",
        r"Subprocess (\S+) \(pid=(\d+)\) crashed with exit code (-?\d+)",
        fatal("subprocess_crashed", exit_group=3),
    ),
    rule("SCHED_EXC", r"Scheduler hit an exception:", fatal("scheduler_exception")),
    rule("INIT_FAIL", r"Initialization failed\.", fatal("init_failed")),
    rule(
        "HEALTH_FAIL",
        r"Health check failed\. Server couldn't get a response from detokenizer",
        fatal("health_check_failed"),
    ),
    rule(
        "SIGQUIT_CHILD",
        r"Received sigquit from a child process\. It usually means the child failed\.",
        fatal("child_failed"),
    ),
    rule(
        "SIGQUIT_RUN",
        r"SIGQUIT received\. .*It usually means one child failed\.",
        fatal("child_failed"),
    ),
)

STARTUP_RULES: tuple[Rule, ...] = (
    rule("WEIGHT_BEG", r"Load weight begin\. avail mem=([\d.]+) GB", _weight_begin),
    rule(
        "SHARDS",
        r"(?:Loading safetensors checkpoint shards|Multi-thread loading shards"
        r"|Loading pt checkpoint shards):\s+(\d+)% Completed \| (\d+)/(\d+) \[",
        _shards,
        "text",
    ),
    rule(
        "WEIGHT_END",
        r"Load weight end\. (?:elapsed=([\d.]+) s, )?type=(\w+),"
        r".*?avail mem=([\d.]+) GB, mem usage=([\d.]+) GB\.",
        _weight_end,
    ),
    rule(
        "KV_ALLOC",
        r"KV Cache (?:is allocated|VA upper bound)\. (?:dtype: \S+, )?#tokens: (\d+), "
        r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)",
        _kv,
    ),
    rule("POOL_END", r"Memory pool end\. avail mem=([\d.]+) GB", _pool_end),
    rule("GRAPH_OFF", r"(?:Cuda|CUDA) graph is disabled", _graphs_off),
    rule("GRAPH_BEG", _GRAPH + r" graph begin\.", _graph_begin),
    rule(
        "GRAPH_BAR",
        r"Capturing batches \(bs=(\d+) avail_mem=([\d.]+) GB\):\s+(\d+)%"
        r"(?:[^|]*\|[^|]*\|\s*(\d+)/(\d+))?",
        _graph_bar,
        "text",
    ),
    rule(
        "GRAPH_END",
        _GRAPH + r" graph end\. (?:bs=\[[^\]]*\], )?"
        r"(?:elapsed=|Time elapsed: )(?P<elapsed>[\d.]+) s",
        _graph_end,
    ),
    rule(
        "SCHED_INFO",
        r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), "
        r"max_prefill_tokens=(\d+), max_running_requests=(\d+), context_len=(\d+)",
        _sched_info,
    ),
    rule("UV_START", r"Started server process \[(\d+)\]", _uv_start),
    rule("UV_APP", r"Application startup complete\.", _uv_app),
    rule(
        "UV_BIND", r"Uvicorn running on (https?)://(\S+):(\d+) \(Press CTRL\+C to quit\)", _uv_bind
    ),
    rule("READY", r"The server is fired up and ready to roll!", _ready),
)

RUNTIME_RULES: tuple[Rule, ...] = (
    rule("SHUTDOWN", r"SIGTERM received\.|Health check request received during shutdown", _sigterm),
    rule("DRAINING", r"Gracefully exiting\.\.\. Remaining number of requests (\d+)", _draining),
    rule(
        "ACCESS", r'"(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP/[\d.]+" (\d{3})', _access
    ),
    rule(
        "RUN_PREFILL",
        r"Prefill batch.*?(?:token usage: (?P<usage>[\d.]+).*?)?"
        r"#running-req: (?P<running>\d+), #queue-req: (?P<queued>\d+)"
        r"(?:.*?input throughput \(token/s\): (?P<throughput>[\d.]+))?",
        _batch("prefill"),
    ),
    rule(
        "RUN_DECODE",
        r"Decode batch.*?#running-req: (?P<running>\d+)"
        r"(?:.*?token usage: (?P<usage>[\d.]+))?"
        r"(?:.*?gen throughput \(token/s\): (?P<throughput>[\d.]+))?"
        r"(?:.*?#queue-req: (?P<queued>\d+))?",
        _batch("decode"),
    ),
    rule("TRACEBACK", r"^Traceback \(most recent call last\):", _traceback, "text"),
)

RULES: tuple[Rule, ...] = (*ARGS_RULES, *FATAL_RULES, *STARTUP_RULES, *RUNTIME_RULES)
