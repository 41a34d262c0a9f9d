"""Typed events parsed from one SGLang server log line.

Every event carries the ``LogLine`` it came from, so whoever reports it can quote the
evidence verbatim. ``LogEvent`` is the union of all of them; ``OtherLine`` is a line no
pattern recognised (it still proves the server is writing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LogLine:
    """One line of the log.

    ``text`` is the line as written (without its terminator); ``message`` is the part after
    SGLang's ``[timestamp ranks]`` prefix (the whole text when there is no prefix);
    ``ranks`` are the rank tags such as ``"TP3"`` or ``"DP0 TP3"`` (empty for the main
    process); ``partial`` marks an unterminated tail, such as a tqdm bar still updating.
    """

    text: str
    message: str
    timestamp: str | None = None
    ranks: str = ""
    partial: bool = False


@dataclass(frozen=True)
class ServerArgsSeen:
    """The ``server_args=…`` line; ``fields`` holds the scalar settings found in it."""

    line: LogLine
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WeightLoadBegin:
    """``Load weight begin. avail mem=X GB``: the loading_weights phase starts."""

    line: LogLine
    avail_gb: float


@dataclass(frozen=True)
class ShardProgress:
    """A checkpoint-shard loading bar update: ``done`` of ``total`` shards, ``percent``."""

    line: LogLine
    percent: int
    done: int
    total: int


@dataclass(frozen=True)
class WeightLoadEnd:
    """``Load weight end. …``: weights are on the device; the KV cache comes next."""

    line: LogLine
    elapsed_s: float | None
    model_class: str
    avail_gb: float
    mem_usage_gb: float


@dataclass(frozen=True)
class KvCacheAllocated:
    """``KV Cache is allocated. … #tokens: N, …``: the KV pool size in tokens and GB."""

    line: LogLine
    tokens: int
    size_gb: float


@dataclass(frozen=True)
class MemoryPoolEnd:
    """``Memory pool end. avail mem=X GB``."""

    line: LogLine
    avail_gb: float


@dataclass(frozen=True)
class GraphsDisabled:
    """The server will not capture CUDA graphs (so no capturing_graphs phase)."""

    line: LogLine


@dataclass(frozen=True)
class GraphCaptureBegin:
    """``Capture … CUDA graph begin.``; ``stage`` is e.g. ``"target decode"`` or ``""``."""

    line: LogLine
    stage: str


@dataclass(frozen=True)
class GraphCaptureProgress:
    """A ``Capturing batches (bs=… avail_mem=… GB): N%`` bar update."""

    line: LogLine
    batch_size: int
    avail_gb: float
    percent: int
    done: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class GraphCaptureEnd:
    """``Capture … CUDA graph end. … elapsed=X s``."""

    line: LogLine
    stage: str
    elapsed_s: float


@dataclass(frozen=True)
class SchedulerLimits:
    """``max_total_num_tokens=…, …, context_len=…``: the scheduler's resolved limits."""

    line: LogLine
    max_total_num_tokens: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int


@dataclass(frozen=True)
class ServerProcessStarted:
    """Uvicorn's ``Started server process [PID]``: the ranks are ready, HTTP is starting."""

    line: LogLine
    pid: int


@dataclass(frozen=True)
class AppStartupComplete:
    """Uvicorn's ``Application startup complete.``"""

    line: LogLine


@dataclass(frozen=True)
class PortBound:
    """Uvicorn's ``Uvicorn running on http://HOST:PORT``: the port is open (warm-up starts)."""

    line: LogLine
    scheme: str
    host: str
    port: int


@dataclass(frozen=True)
class HttpAccess:
    """A uvicorn access line, e.g. ``"GET /health HTTP/1.1" 503``."""

    line: LogLine
    method: str
    path: str
    status: int


@dataclass(frozen=True)
class ServerReady:
    """``The server is fired up and ready to roll!``"""

    line: LogLine


@dataclass(frozen=True)
class Fatal:
    """A line that means the server is failing; ``kind`` names the failure (e.g. ``oom``).

    ``exit_code`` is the exit code the line reports for a rank or subprocess, if any
    (-9 usually means the kernel's OOM killer).
    """

    line: LogLine
    kind: str
    exit_code: int | None = None


@dataclass(frozen=True)
class Shutdown:
    """SIGTERM received or draining; ``remaining`` requests when the line says."""

    line: LogLine
    remaining: int | None = None


@dataclass(frozen=True)
class BatchStats:
    """A ``Prefill batch`` / ``Decode batch`` line: load and throughput of one step."""

    line: LogLine
    kind: str
    running: int
    queued: int | None
    throughput: float | None
    token_usage: float | None


@dataclass(frozen=True)
class TracebackStart:
    """``Traceback (most recent call last):`` (what follows explains a crash)."""

    line: LogLine


@dataclass(frozen=True)
class OtherLine:
    """A line no pattern recognised."""

    line: LogLine


LogEvent = (
    ServerArgsSeen
    | WeightLoadBegin
    | ShardProgress
    | WeightLoadEnd
    | KvCacheAllocated
    | MemoryPoolEnd
    | GraphsDisabled
    | GraphCaptureBegin
    | GraphCaptureProgress
    | GraphCaptureEnd
    | SchedulerLimits
    | ServerProcessStarted
    | AppStartupComplete
    | PortBound
    | HttpAccess
    | ServerReady
    | Fatal
    | Shutdown
    | BatchStats
    | TracebackStart
    | OtherLine
)
