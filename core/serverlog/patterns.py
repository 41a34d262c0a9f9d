"""The one table of SGLang log patterns, written against real logs from 0.1 to 2026 builds
(tests/fixtures/serverlogs; 0.5.23's own start-up is tests/fixtures/realsrv/server_startup.log).

``RULES`` is tried in order and the first match wins: the ``server_args`` line first (it is
long and quotes flag names such as ``enable_nccl_nvls``), then the fatal patterns (a line
saying "CUDA out of memory" must never pass for progress), then start-up and run-time
lines, then the shapes that need no wording (an exception line, a tqdm bar), then curated
warnings and errors the server survives. A rule searches the message left under every
prefix (``scope "message"``, see ``core.serverlog.prefix``) or the whole line (``"text"``).
Patterns match the words that stay the same across versions and read every figure as
optional, so one rule covers every form of a line (``Load weight end`` with or without
``type=``/``mem usage``), not one rule per log.
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


def _field(pattern: str) -> Callable[[str], str | None]:
    regex = re.compile(pattern)

    def find(text: str) -> str | None:
        m = regex.search(text)
        return m[1] if m else None

    return find


_TRACEBACK_OPENER = "Traceback (most recent call last):"


def fatal(kind: str, exit_group: int | str | None = None) -> Builder:
    """A builder of ``Fatal(kind)``, reading the exit code from ``exit_group`` if given."""

    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        code = int(m[exit_group]) if exit_group is not None and m[exit_group] else None
        opens = line.text.rstrip().endswith(_TRACEBACK_OPENER)
        return ev.Fatal(line, kind, exit_code=code, opens_traceback=opens)

    return build


def _killed(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.Fatal(line, "killed", exit_code=-9)


def error(kind: str) -> Builder:
    """A builder of ``ErrorLine(kind)``."""
    return lambda m, line: ev.ErrorLine(line, kind)


def warning(kind: str) -> Builder:
    """A builder of ``WarningLine(kind)``."""
    return lambda m, line: ev.WarningLine(line, kind)


def dist(step: str) -> Builder:
    """A builder of ``DistributedInit(step)``; NCCL lines name their CUDA device."""

    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        device = _NCCL_DEVICE.match(line.text)
        return ev.DistributedInit(line, step, int(device[1]) if device else None)

    return build


_NCCL_DEVICE = re.compile(r"^(?:\S+\s+\|\s)?[\w.-]+:\d+:\d+ \[(\d+)\] ")


def _server_args(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ServerArgsSeen(line, extract_server_args(line.message))


def _weight_begin(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.WeightLoadBegin(line, float(m[1]))


_RATE = _field(r"([\d.]+)s/it\]")


def _shards(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ShardProgress(line, int(m[1]), int(m[2]), int(m[3]), _opt_float(_RATE(line.text)))


_ELAPSED = _field(r"(?:elapsed=|Time elapsed: |in )([\d.]+) ?s\b")
_TYPE = _field(r"type=(\w+)")
_AVAIL = _field(r"avail[ _]mem=([\d.]+) ?GB")
_USAGE = _field(r"mem usage=([\d.]+) GB")


def _weight_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    text = line.message
    return ev.WeightLoadEnd(
        line,
        elapsed_s=_opt_float(_ELAPSED(text)),
        model_class=_TYPE(text) or "",
        avail_gb=_opt_float(_AVAIL(text)),
        mem_usage_gb=_opt_float(_USAGE(text)),
    )


_TOKENS = _field(r"#tokens: (\d+)")
_KV_SIZE = _field(r"KV size: ([\d.]+) GB")
_K_SIZE = _field(r"\bK size: ([\d.]+) GB")
_V_SIZE = _field(r"\bV size: ([\d.]+) GB")


def _kv(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    text = line.message
    size = _KV_SIZE(text)
    total = float(size) if size else float(_K_SIZE(text) or 0) + float(_V_SIZE(text) or 0)
    return ev.KvCacheAllocated(line, tokens=_opt_int(_TOKENS(text)), size_gb=total)


def _pool_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.MemoryPoolEnd(line, float(m[1]))


def _graphs_off(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphsDisabled(line)


def _stage(m: re.Match[str]) -> str:
    return " ".join((m["stage"] or "").split())


def _graph_begin(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureBegin(line, _stage(m), m["device"].lower())


_BS = _field(r"\b(?:bs|num_tokens)=(\d+)")
_BAR = re.compile(r"(\d{1,3})%\|[^|]*\|\s*(\d+)/(\d+)")


def _graph_bar(labelled: bool) -> Builder:
    """A capture bar; an unlabelled one is read as capture only where the phase says so."""

    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        text = line.text
        bar = _BAR.search(text)
        return ev.GraphCaptureProgress(
            line,
            batch_size=_opt_int(_BS(text)),
            avail_gb=_opt_float(_AVAIL(text)),
            percent=int(m["pct"]),
            done=int(bar[2]) if bar else None,
            total=int(bar[3]) if bar else None,
            labelled=labelled,
            rate_s=_opt_float(_RATE(text)),
        )

    return build


def _graph_note(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureProgress(line, batch_size=None, avail_gb=None, percent=None)


def _graph_end(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.GraphCaptureEnd(line, _stage(m), _opt_float(_ELAPSED(line.message)))


_LIMITS = {
    name: _field(rf"\b{name}=(-?\d+)")
    for name in (
        "chunked_prefill_size",
        "max_prefill_tokens",
        "max_running_requests",
        "context_len",
    )
}


def _sched_info(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    found = {name: _opt_int(find(line.message)) for name, find in _LIMITS.items()}
    return ev.SchedulerLimits(line, int(m[1]), **found)


def _uv_start(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ServerProcessStarted(line, int(m[1]))


def _routine(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.Routine(line)


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


_RUNNING = _field(r"#running-req: (\d+)")
_QUEUED = _field(r"#queue-req: (\d+)")
_USAGE_FRACTION = _field(r"token usage: ([\d.]+)")
_THROUGHPUT = _field(r"(?:input|gen) throughput \(token/s\): ([\d.]+)")
_ACCEPT_LENGTH = _field(r"(?<!block )\baccept len: ([\d.]+)")
_ACCEPT_RATE = _field(r"\baccept rate: ([\d.]+)")


def _batch(kind: str) -> Builder:
    """A ``Prefill batch`` / ``Decode batch`` line; its fields come in any order across
    versions (PD servers add ``#unbootstrapped-req`` and ``#transferring-req``)."""

    def build(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
        text = line.message
        running = _RUNNING(text)
        if running is None:
            raise ValueError("a batch line without #running-req")
        return ev.BatchStats(
            line,
            kind=kind,
            running=int(running),
            queued=_opt_int(_QUEUED(text)),
            throughput=_opt_float(_THROUGHPUT(text)),
            token_usage=_opt_float(_USAGE_FRACTION(text)),
            accept_length=_opt_float(_ACCEPT_LENGTH(text)),
            accept_rate=_opt_float(_ACCEPT_RATE(text)),
        )

    return build


def _traceback(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.TracebackStart(line)


def _exception(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.ExceptionLine(line, m["name"])


_GRAPH = (
    r"Capture (?P<stage>(?:[\w-]+ ){0,4}?)(?P<device>cuda|CUDA|npu|NPU|cpu|CPU|device) graphs?"
)
_NCCL = (
    r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError"
    r"|ncclInvalidUsage|Watchdog caught collective operation timeout|DistBackendError"
)
_CUDA = (
    r"CUDA error: |CUDA Error: |HIP error: |no kernel image is available"
    r"|an illegal memory access was encountered|device-side assert triggered"
    r"|CUBLAS_STATUS_\w+|CUDA driver version is insufficient"
)
_SCHED_EXC = (
    r"\b(?:Scheduler|TpModelWorkerClient|DataParallelController|DetokenizerManager"
    r"|TokenizerManager|ModelTpServer) hit an exception:"
    r"|Exception in (?:run_tp_server|ModelTpServer|ControllerSingle|ControllerMulti"
    r"|run_data_parallel_controller_process|run_detokenizer_process):"
)
# The last line of a traceback: a (dotted) exception name, then nothing or ": message".
_EXCEPTION = (
    r"^(?P<name>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)"
    r"|(?:[A-Za-z_]\w*\.)+[A-Z]\w*)(?::\s.*|:?)$"
)

def _frame(m: re.Match[str], line: ev.LogLine) -> ev.LogEvent:
    return ev.OtherLine(line)


# A traceback frame ('  File "…", line 3') or its source line ('    raise RuntimeError(
# f"NCCL error: …")'): the words in it are code, never evidence.
FRAME_RULES: tuple[Rule, ...] = (rule("FRAME", r'^  File "|^ {4,}\S', _frame, "text"),)

ARGS_RULES: tuple[Rule, ...] = (rule("ARGS", r"^server_args=(?:ServerArgs\(|\{)", _server_args),)

FATAL_RULES: tuple[Rule, ...] = (
    rule(
        "CUDA_OOM",
        r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|HIP out of memory",
        fatal("oom"),
        "text",
    ),
    rule(
        "NOT_ENOUGH_MEM",
        r"Not enought? memory\. Please try to increase --mem-fraction-static"
        r"|Loaded weights leave no GPU memory for the KV cache",
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
    rule("DIST_TIMEOUT", r"\bDist(?:Store|Network)Error\b", fatal("dist_timeout"), "text"),
    rule("GRAPH_FAIL", _GRAPH + r" failed", fatal("graph_capture_failed")),
    rule("CUDA_ERROR", _CUDA, fatal("cuda_error"), "text"),
    rule("WATCHDOG", r"[Ww]atchdog timeout \(self\.watchdog_timeout=", fatal("watchdog_timeout")),
    rule("PYSPY_DUMP", r"^Pyspy dump for PID \d+:", fatal("watchdog_timeout")),
    rule(
        "FATAL_SIGNAL",
        r"^Fatal Python error: |^Segmentation fault|^Bus error|^Aborted \(core dumped\)"
        r"|terminate called after throwing an instance of",
        fatal("fatal_signal"),
    ),
    rule("NATIVE_TRACE", r"^==== backtrace \(tid:\s*\d+\) ====", fatal("native_backtrace")),
    rule("KILLED", r"^\s*(?:Killed|已杀死)\s*$", _killed, "text"),
    rule(
        "RANK_DIED",
        r"Rank (\d+) scheduler died during initialization \(exit code: (-?\d+)\)",
        fatal("rank_died", exit_group=2),
    ),
    rule("RANK_DEAD", r"Rank (\d+) scheduler is dead\.", fatal("rank_died")),
    rule("RANK_EXIT_CODE", r"^Exit code: (-?\d+)$", fatal("rank_died", exit_group=1)),
    rule(
        "SUBPROC_CRASH",
        r"Subprocess (\S+) \(pid=(\d+)\) crashed with exit code (-?\d+)",
        fatal("subprocess_crashed", exit_group=3),
    ),
    rule(
        "CHILD_EXIT",
        r"Child process unexpectedly failed with an exit code (-?\d+)",
        fatal("child_exited", exit_group=1),
    ),
    rule("SCHED_EXC", _SCHED_EXC, fatal("scheduler_exception")),
    rule(
        "INIT_FAIL",
        r"Initialization failed\.|\b(?:router|controller|detoken(?:izer)?)[ _]init[ _]state: "
        r"Traceback",
        fatal("init_failed"),
    ),
    rule(
        "WARMUP_THREAD",
        r"^Exception in thread .*\(_wait_and_warmup\):",
        fatal("init_failed"),
    ),
    rule(
        "HEALTH_FAIL",
        r"Health check failed\. Server couldn't get a response from detokenizer",
        fatal("health_check_failed"),
    ),
    rule(
        "SIGQUIT_CHILD",
        r"Received sigquit from a child proces",
        fatal("child_failed"),
    ),
    rule(
        "SIGQUIT_RUN",
        r"SIGQUIT received\. .*It usually means one child failed\.",
        fatal("child_failed"),
    ),
)

DIST_RULES: tuple[Rule, ...] = (
    rule(
        "DIST_BEGIN",
        r"^Init (?:torch distributed|parallel|nccl|process group) begin"
        r"|\bdistributed_init_method=\S+ backend=",
        dist("begin"),
    ),
    # 0.5.x logs "Memory baseline taken" once the ranks' collective memory check after
    # parallel init returns: distributed init is over then, too.
    rule("DIST_END", r"^Init (?:torch distributed|parallel|process group) ends?\."
         r"|^Memory baseline taken\.", dist("end")),
    rule("DIST_NCCL", r"sglang is using nccl==|^\[Gloo\] Rank \d+ is connected to", dist("nccl")),
    rule(
        "DIST_COMM",
        r"^NCCL version \d|^NCCL INFO (?:Bootstrap|ncclCommInitRank|comm 0x|cudaDriverVersion"
        r"|NCCL version \d"
        r"|NET/|Channel |Connected all|Init COMPLETE|.* Init COMPLETE)",
        dist("comm"),
    ),
    rule(
        "DIST_ALLREDUCE",
        r"Custom allreduce is disabled because this process group spans across nodes"
        r"|reading GPU P2P access cache from|writing GPU P2P access cache to",
        dist("allreduce"),
    ),
)

STARTUP_RULES: tuple[Rule, ...] = (
    rule("WEIGHT_BEG", r"Load weight begin\. avail mem=([\d.]+) GB", _weight_begin),
    rule("WEIGHT_FILES", r"^Using model weights format \[", lambda m, line: ev.WeightFiles(line)),
    rule(
        "SHARDS",
        r"(?:Loading safetensors checkpoint shards|Multi-thread loading shards"
        r"|Loading pt checkpoint shards|Loading (?:\w+ ){0,3}shards):\s+(\d+)% Completed"
        r" \| (\d+)/(\d+) \[",
        _shards,
        "text",
    ),
    rule("WEIGHT_END", r"^Load weight end\.", _weight_end),
    rule("KV_ALLOC", r"KV Cache (?:is allocated|VA upper bound)\.", _kv),
    rule("POOL_END", r"Memory pool end\. avail mem=([\d.]+) GB", _pool_end),
    rule(
        "GRAPH_OFF",
        r"(?:Cuda|CUDA) graph is disabled|Eagle Cuda Graph is disabled",
        _graphs_off,
    ),
    rule("GRAPH_BEG", _GRAPH + r" begin\.", _graph_begin),
    rule(
        "GRAPH_BAR",
        r"(?P<label>Capturing batches|Capturing num tokens|Compiling num tokens)[^:]*:"
        r"\s+(?P<pct>\d{1,3})%",
        _graph_bar(labelled=True),
        "text",
    ),
    rule(
        "GRAPH_NOTE",
        r"^Capture (?:cuda|CUDA|npu|NPU) graph (?:bs|num tokens) \[|Registering \d+ cuda graph "
        r"addresses",
        _graph_note,
    ),
    rule("GRAPH_END", _GRAPH + r" end\.", _graph_end),
    rule("SCHED_INFO", r"\bmax_total_num_tokens=(\d+)", _sched_info),
    rule("UV_START", r"Started server process \[(\d+)\]", _uv_start),
    # Printed on every start, between lines that do carry the phase: routine, not unknown.
    rule("UV_WAIT", r"^(?:INFO:\s+)?Waiting for application startup\.", _routine),
    rule("ENGINE_TIMINGS", r"^Engine startup timings \(s\):", _routine),
    rule("UV_APP", r"Application startup complete\.", _uv_app),
    rule(
        "UV_BIND", r"Uvicorn running on (https?)://(\S+):(\d+) \(Press CTRL\+C to quit\)", _uv_bind
    ),
    rule("READY", r"The server is fired up and ready to roll!", _ready),
)

RUNTIME_RULES: tuple[Rule, ...] = (
    rule(
        "SHUTDOWN",
        r"SIGTERM received|Health check request received during shutdown|^KeyboardInterrupt$"
        r"|^(?:INFO:\s+)?Shutting down$|Application shutdown complete\."
        r"|^(?:INFO:\s+)?Finished server process \[\d+\]",
        _sigterm,
    ),
    rule("DRAINING", r"Gracefully exiting\.\.\. Remaining number of requests (\d+)", _draining),
    rule(
        "ACCESS",
        r'\S:\d+ - "(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP/[\d.]+" (\d{3})',
        _access,
    ),
    rule("RUN_PREFILL", r"Prefill batch\b", _batch("prefill")),
    rule("RUN_DECODE", r"Decode batch\b", _batch("decode")),
    rule("TRACEBACK", r"^Traceback \(most recent call last\):", _traceback),
)

SHAPE_RULES: tuple[Rule, ...] = (
    rule("EXCEPTION", _EXCEPTION, _exception),
    # A bare tqdm bar ("  0%|    | 0/23 [00:00<?, ?it/s]"): in SGLang, graph capture's.
    rule("BARE_BAR", r"^\s*(?P<pct>\d{1,3})%\|", _graph_bar(labelled=False), "text"),
)

NOTE_RULES: tuple[Rule, ...] = (
    rule(
        "WARN_ALLREDUCE",
        r"Custom allreduce is disabled because (?:your platform lacks GPU P2P|.*P2P test failed)",
        warning("custom_allreduce_off"),
    ),
    rule("WARN_JIT", r"Prebuilt kernels not found, using JIT backend", warning("flashinfer_jit")),
    rule(
        "WARN_MEM_FRACTION",
        r"Automatically reduce --mem-fraction-static",
        warning("mem_fraction_reduced"),
    ),
    rule(
        "WARN_KV_SCALES",
        r"Using FP8 KV cache but no scaling factors provided",
        warning("fp8_kv_scales"),
    ),
    rule(
        "WARN_IGNORABLE",
        r"The following error message '.*' can be ignored",
        warning("ignorable_error_follows"),
    ),
    rule("WARN_RDMA", r"Failed to register memory", warning("rdma_register_failed")),
    rule(
        "WARN_RESOURCE_TRACKER",
        r"resource_tracker: process died unexpectedly",
        warning("resource_tracker"),
        "text",
    ),
    rule(
        "KV_TRANSFER_FAIL",
        r"(?:Prefill|Decode) transfer failed|^Session \S+ failed\.|Memory region not registered",
        error("kv_transfer_failed"),
    ),
    rule(
        "NCCL_CLOSED",
        r"NCCL INFO \[Service thread\] Connection closed by localRank",
        error("nccl_connection_closed"),
    ),
)

RULES: tuple[Rule, ...] = (
    *FRAME_RULES,
    *ARGS_RULES,
    *FATAL_RULES,
    *DIST_RULES,
    *STARTUP_RULES,
    *RUNTIME_RULES,
    *SHAPE_RULES,
    *NOTE_RULES,
)
