"""Typed events parsed from one SGLang server log line.

Every event carries the ``LogLine`` it came from, so whoever reports it can quote the
evidence verbatim. ``LogEvent`` is the union of all of them; ``OtherLine`` is a line no
pattern recognised (it still proves the server is writing, and it is counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eagle_tui.core.serverlog.prefix import Stamp


@dataclass(frozen=True)
class LogLine:
    """One line of the log.

    ``text`` is the line as written (without its terminator); ``message`` is what is left
    under every prefix (``core.serverlog.prefix``: SGLang's ``[timestamp ranks]``, docker,
    Python logging, vLLM, glog, NCCL); ``timestamp`` is the first stamp as written and
    ``stamp`` its parts; ``ranks`` are the rank tags such as ``"TP3"`` or ``"DP0 TP3"``
    (empty for the main process); ``partial`` marks an unterminated tail, such as a tqdm
    bar still updating.
    """

    text: str
    message: str
    timestamp: str | None = None
    ranks: str = ""
    partial: bool = False
    stamp: Stamp | None = None
    service: str = ""


@dataclass(frozen=True)
class ServerArgsSeen:
    """The ``server_args=…`` line; ``fields`` holds the scalar settings found in it."""

    line: LogLine
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DistributedInit:
    """A step of distributed init: torch.distributed / NCCL / gloo / custom all-reduce.

    ``step`` is ``begin`` (Init torch distributed / Init parallel / Init nccl begin),
    ``nccl`` (``sglang is using nccl==``, gloo peers connected), ``comm`` (NCCL's own
    bootstrap and communicator lines), ``allreduce`` (custom all-reduce set up or
    disabled) or ``end``. ``device`` is the CUDA device an NCCL line names (``[2]``).
    """

    line: LogLine
    step: str
    device: int | None = None


@dataclass(frozen=True)
class WeightLoadBegin:
    """``Load weight begin. avail mem=X GB``: the loading_weights phase starts."""

    line: LogLine
    avail_gb: float


@dataclass(frozen=True)
class WeightFiles:
    """``Using model weights format ['*.safetensors']``: the loader found (or is fetching)
    the checkpoint files; the shard bar follows unless they are still downloading."""

    line: LogLine


@dataclass(frozen=True)
class ShardProgress:
    """A checkpoint-shard loading bar update: ``done`` of ``total`` shards, ``percent``;
    ``rate_s`` is tqdm's seconds per shard when it says."""

    line: LogLine
    percent: int
    done: int
    total: int
    rate_s: float | None = None


@dataclass(frozen=True)
class WeightLoadEnd:
    """``Load weight end. …``: weights are on the device; the KV cache comes next.

    Every figure is optional: 0.3/0.4 print no ``mem usage``, newer builds no ``type=``.
    """

    line: LogLine
    elapsed_s: float | None = None
    model_class: str = ""
    avail_gb: float | None = None
    mem_usage_gb: float | None = None


@dataclass(frozen=True)
class KvCacheAllocated:
    """``KV Cache is allocated. … #tokens: N, …``: the KV pool size in tokens and GB
    (0.4.3 prints only the sizes)."""

    line: LogLine
    tokens: int | None
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
    """``Capture … graph begin.``; ``stage`` is e.g. ``"target decode"``, ``"draft"`` or
    ``""``; ``device`` is ``cuda``, ``npu`` or ``cpu``."""

    line: LogLine
    stage: str
    device: str = "cuda"


@dataclass(frozen=True)
class GraphCaptureProgress:
    """A graph-capture progress update: ``Capturing batches (bs=… avail_mem=… GB): N%``,
    ``Capturing num tokens …``, an unlabelled tqdm bar, or ``Registering N cuda graph
    addresses``. ``labelled`` is False for a bare bar (its meaning depends on the phase);
    ``rate_s`` is tqdm's seconds per step when it says (``12.3s/it``)."""

    line: LogLine
    batch_size: int | None
    avail_gb: float | None
    percent: int | None
    done: int | None = None
    total: int | None = None
    labelled: bool = True
    rate_s: float | None = None


@dataclass(frozen=True)
class GraphCaptureEnd:
    """``Capture … graph end. … elapsed=X s`` (the elapsed time is optional)."""

    line: LogLine
    stage: str
    elapsed_s: float | None


@dataclass(frozen=True)
class SchedulerLimits:
    """``max_total_num_tokens=…, …, context_len=…``: the scheduler's resolved limits
    (older releases print fewer of them)."""

    line: LogLine
    max_total_num_tokens: int
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None


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
    (-9 usually means the kernel's OOM killer); ``opens_traceback`` when the line ends
    with ``Traceback (most recent call last):`` (the cause follows).
    """

    line: LogLine
    kind: str
    exit_code: int | None = None
    opens_traceback: bool = False


@dataclass(frozen=True)
class ErrorLine:
    """An error the server survives, or may: a failed KV transfer, an RDMA error, an
    ``E…``/``ERROR`` line no rule names more precisely."""

    line: LogLine
    kind: str


@dataclass(frozen=True)
class WarningLine:
    """A warning worth showing (custom all-reduce off, FlashInfer JIT fallback, …)."""

    line: LogLine
    kind: str


@dataclass(frozen=True)
class ExceptionLine:
    """The line naming the exception at the end of a traceback (``ValueError: …``,
    ``AssertionError``, ``triton.runtime.errors.OutOfResources: …``)."""

    line: LogLine
    name: str


@dataclass(frozen=True)
class Shutdown:
    """A deliberate stop: SIGTERM received, Ctrl-C, uvicorn shutting down, or draining;
    ``remaining`` requests when the line says."""

    line: LogLine
    remaining: int | None = None


@dataclass(frozen=True)
class BatchStats:
    """A ``Prefill batch`` / ``Decode batch`` line: load and throughput of one step.

    With speculative decoding a decode line also says ``accept len`` (tokens per verify step
    over the interval since the previous line, bonus token included) and ``accept rate``
    (accepted / proposed drafts over that interval)."""

    line: LogLine
    kind: str
    running: int
    queued: int | None
    throughput: float | None
    token_usage: float | None
    accept_length: float | None = None
    accept_rate: float | None = None


@dataclass(frozen=True)
class TracebackStart:
    """``Traceback (most recent call last):`` (what follows explains a crash)."""

    line: LogLine


@dataclass(frozen=True)
class Routine:
    """A line known to say nothing the watch uses (uvicorn's ``Waiting for application
    startup.``, SGLang's ``Engine startup timings (s): …`` summary): read, not counted as
    unrecognised."""

    line: LogLine


@dataclass(frozen=True)
class OtherLine:
    """A line no pattern recognised."""

    line: LogLine


LogEvent = (
    ServerArgsSeen
    | DistributedInit
    | WeightLoadBegin
    | WeightFiles
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
    | ErrorLine
    | WarningLine
    | ExceptionLine
    | Shutdown
    | BatchStats
    | TracebackStart
    | Routine
    | OtherLine
)
