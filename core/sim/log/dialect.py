"""What varies between SGLang versions' logs, as one interface: a log dialect.

The sim's behaviour (phases, timing, HTTP) is the same in every dialect; only the
words differ: which start-up lines appear and how they read, the batch lines, the
rank tags, and what the launcher prints when a scheduler dies. ``--log-dialect``
picks one by SGLang version; docs/sim.md lists where every line comes from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eagle_tui.core.sim.config import LOG_DIALECTS
from eagle_tui.core.sim.model.capacity import Capacity


@dataclass(frozen=True)
class PrefillStats:
    """The numbers of one ``Prefill batch`` line."""

    new_seq: int
    new_tokens: int
    cached_tokens: int
    cache_hit_rate: float  # share of all prompt tokens so far served from the cache
    token_usage: float
    running: int
    queued: int
    input_throughput: float


@dataclass(frozen=True)
class DecodeStats:
    """The numbers of one ``Decode batch`` line."""

    running: int
    tokens: int
    token_usage: float
    throughput: float
    queued: int
    accept: tuple[float, float] | None = None  # accept length and rate, with speculation


def accept_text(stats: DecodeStats) -> str:
    """``accept len: 4.00, accept rate: 1.00, `` with speculation, else nothing."""
    if stats.accept is None:
        return ""
    length, rate = stats.accept
    return f"accept len: {length:.2f}, accept rate: {rate:.2f}, "


@dataclass(frozen=True)
class LaunchDeath:
    """What the launcher prints when a scheduler rank dies before the server is up.

    ``exit_code`` None: the launcher kills its whole process tree (SIGKILL, -9);
    otherwise it raises (``traceback`` is its own) and the process exits with it.
    """

    main_lines: tuple[str, ...]
    traceback: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class RuntimeCrash:
    """What the main process prints after a scheduler exception while serving.

    ``before`` the pause (SGLang seconds, scaled by ``--time-scale``), ``after`` it;
    then the process tree is killed.
    """

    before: tuple[str, ...]
    pause: float
    after: tuple[str, ...]


def limits_text(capacity: Capacity, chunked: int, max_prefill: int) -> str:
    """The scheduler's limits as every version prints them (``max_total_num_tokens=…``)."""
    return (f"max_total_num_tokens={capacity.max_total_num_tokens}, "
            f"chunked_prefill_size={chunked}, max_prefill_tokens={max_prefill}, "
            f"max_running_requests={capacity.max_running_requests}, "
            f"context_len={capacity.context_len}")


class LogDialect(ABC):
    """One SGLang version's log lines (messages after the ``[time TPn]`` prefix)."""

    version: str
    tag_single_rank: bool  # scheduler lines carry " TP0" even when TP is 1
    shard_desc: str  # the weight loader's progress-bar description
    decode_log_interval: int = 40  # decode steps between two Decode batch lines

    @abstractmethod
    def recorded_server_args(self) -> Mapping[str, Any]:
        """That version's resolved server arguments, as recorded from a real server."""

    @abstractmethod
    def server_args_line(self, args: Mapping[str, Any]) -> str:
        """``server_args=…`` as the main process prints it first."""

    @abstractmethod
    def init_lines(self, elapsed: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Per-rank lines at the start and at the end of distributed init."""

    def weight_begin(self, avail: float) -> str:
        """``Load weight begin.`` (the same words since 0.3)."""
        return f"Load weight begin. avail mem={avail:.2f} GB"

    @abstractmethod
    def weight_end(self, elapsed: float, arch: str, avail: float, used: float) -> str:
        """``Load weight end. …``."""

    @abstractmethod
    def kv_allocated(self, tokens: int, k_gb: float, v_gb: float) -> str:
        """``KV Cache is allocated. …``."""

    def pool_end(self, avail: float) -> str:
        """``Memory pool end.`` (the same words since 0.3)."""
        return f"Memory pool end. avail mem={avail:.2f} GB"

    @abstractmethod
    def graph_begin(self, avail: float) -> str:
        """The CUDA-graph capture's first line."""

    @abstractmethod
    def graph_bar(self, bs: int, avail: float, done: int, total: int, elapsed: float) -> str:
        """One redraw of the capture's tqdm bar (rank 0 only)."""

    @abstractmethod
    def graph_end(self, batch_sizes: tuple[int, ...], elapsed: float, used: float,
                  avail: float) -> str:
        """The CUDA-graph capture's last line."""

    @abstractmethod
    def graph_failure_hint(self) -> str:
        """The advice SGLang appends to ``Capture cuda graph failed: …``."""

    @abstractmethod
    def scheduler_limits(self, capacity: Capacity, chunked: int, max_prefill: int,
                         avail: float) -> str:
        """``max_total_num_tokens=…`` from rank 0 once the scheduler is built."""

    @abstractmethod
    def engine_timings(self, seconds: Mapping[str, float]) -> str | None:
        """``Engine startup timings (s): …``, where the version prints it."""

    @abstractmethod
    def prefill_line(self, stats: PrefillStats) -> str:
        """``Prefill batch…``."""

    @abstractmethod
    def decode_line(self, stats: DecodeStats) -> str:
        """``Decode batch…``."""

    @abstractmethod
    def child_failed(self, rank: int, exit_code: int) -> LaunchDeath:
        """A rank raised during initialisation and signalled the launcher."""

    @abstractmethod
    def rank_killed(self, rank: int, exit_code: int) -> LaunchDeath:
        """A rank vanished during initialisation without a word (the OOM killer)."""

    @abstractmethod
    def kill_tree_line(self, pid: int) -> str | None:
        """What ``kill_process_tree`` logs before the SIGKILL, where it logs."""

    @abstractmethod
    def runtime_crash(self) -> RuntimeCrash:
        """The main process's reaction to a scheduler exception while serving."""


def dialect_named(version: str) -> LogDialect:
    """The dialect of ``version`` (one of ``config.LOG_DIALECTS``)."""
    from eagle_tui.core.sim.log.dialect_04 import Sglang04  # here: they import this module
    from eagle_tui.core.sim.log.dialect_05 import Sglang05

    dialects: dict[str, type[LogDialect]] = {"0.5": Sglang05, "0.4": Sglang04}
    assert tuple(dialects) == LOG_DIALECTS
    return dialects[version]()
