"""SGLang 0.4.2's log lines (the ``lmsysorg/sglang`` image of early February 2025).

The start-up lines follow a complete real log of that image (docs/sim.md quotes
it and names its source); batch lines, crash wording and the launcher's reaction
to a dead rank follow SGLang's scheduler and launcher sources of the 0.4 series.
Differences from 0.5 that a log reader meets: every scheduler line is tagged
``TP0`` even without tensor parallelism, ``server_args=ServerArgs(…)`` instead of
a dict, ``Init torch distributed begin.``, ``Load weight end.`` without elapsed
time or memory usage, a ``KV Cache is allocated.`` line without token count, a
bare CUDA-graph bar, ``Prefill batch.``/``Decode batch.`` with a period, and no
``kill_process_tree`` or crash-diagnostics lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eagle_tui.core.sim.log.dialect import (
    DecodeStats,
    LaunchDeath,
    LogDialect,
    PrefillStats,
    RuntimeCrash,
    accept_text,
    limits_text,
)
from eagle_tui.core.sim.log.dialect_05 import SIGQUIT_FROM_CHILD
from eagle_tui.core.sim.log.progress import tqdm_bar
from eagle_tui.core.sim.log.tracebacks import launcher_lost_rank
from eagle_tui.core.sim.model.capacity import Capacity
from eagle_tui.core.sim.recorded import load_asset


class Sglang04(LogDialect):
    """SGLang 0.4.2."""

    version = "0.4"
    tag_single_rank = True  # configure_logger(prefix=f" TP{tp_rank}") for every rank
    shard_desc = "Loading safetensors checkpoint shards"

    def recorded_server_args(self) -> Mapping[str, Any]:
        """assets/sglang-0.4.2-server-args.json: the real log's ``ServerArgs`` (a GPU run)."""
        args: dict[str, Any] = load_asset("sglang-0.4.2-server-args.json")
        return args

    def server_args_line(self, args: Mapping[str, Any]) -> str:
        """The ServerArgs dataclass repr."""
        fields = ", ".join(f"{key}={value!r}" for key, value in args.items())
        return f"server_args=ServerArgs({fields})"

    def init_lines(self, elapsed: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Only the begin line: 0.4 printed no end of distributed init."""
        return ("Init torch distributed begin.",), ()

    def weight_end(self, elapsed: float, arch: str, avail: float, used: float) -> str:
        """Type, dtype and what is left; neither time nor usage yet."""
        return f"Load weight end. type={arch}, dtype=torch.bfloat16, avail mem={avail:.2f} GB"

    def kv_allocated(self, tokens: int, k_gb: float, v_gb: float) -> str:
        """Sizes only, with a closing period."""
        return f"KV Cache is allocated. K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB."

    def graph_begin(self, avail: float) -> str:
        """The warning that it can take minutes, no memory figure."""
        return "Capture cuda graph begin. This can take up to several minutes."

    def graph_bar(self, bs: int, avail: float, done: int, total: int, elapsed: float) -> str:
        """tqdm with no description: ``  40%|████      | 2/5 […]``."""
        return tqdm_bar("", done, total, elapsed)

    def graph_end(self, batch_sizes: tuple[int, ...], elapsed: float, used: float,
                  avail: float) -> str:
        """Time only."""
        return f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s"

    def graph_failure_hint(self) -> str:
        """The 0.4 CudaGraphRunner's advice."""
        return ("Possible solutions:\n"
                "1. disable cuda graph by --disable-cuda-graph\n"
                "2. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "3. disable torch compile by not using --enable-torch-compile\n"
                "Open an issue on GitHub "
                "https://github.com/sgl-project/sglang/issues/new/choose \n")

    def scheduler_limits(self, capacity: Capacity, chunked: int, max_prefill: int,
                         avail: float) -> str:
        """No memory figure at the end."""
        return limits_text(capacity, chunked, max_prefill)

    def engine_timings(self, seconds: Mapping[str, float]) -> str | None:
        """0.4 printed no timing summary."""
        return None

    def prefill_line(self, stats: PrefillStats) -> str:
        """``Prefill batch. …`` with the cumulative cache hit rate."""
        return (f"Prefill batch. #new-seq: {stats.new_seq}, #new-token: {stats.new_tokens}, "
                f"#cached-token: {stats.cached_tokens}, "
                f"cache hit rate: {100.0 * stats.cache_hit_rate:.2f}%, "
                f"token usage: {stats.token_usage:.2f}, #running-req: {stats.running}, "
                f"#queue-req: {stats.queued}")

    def decode_line(self, stats: DecodeStats) -> str:
        """``Decode batch. …``."""
        return (f"Decode batch. #running-req: {stats.running}, #token: {stats.tokens}, "
                f"token usage: {stats.token_usage:.2f}, {accept_text(stats)}"
                f"gen throughput (token/s): {stats.throughput:.2f}, #queue-req: {stats.queued}")

    def child_failed(self, rank: int, exit_code: int) -> LaunchDeath:
        """The SIGQUIT handler's one line, then the tree is killed."""
        return LaunchDeath((SIGQUIT_FROM_CHILD,))

    def rank_killed(self, rank: int, exit_code: int) -> LaunchDeath:
        """The launcher reads EOF from the rank's pipe, says so and raises."""
        return LaunchDeath(
            (f"Rank {rank} scheduler is dead. Please check if there are relevant logs.",
             f"Exit code: {exit_code}"),
            traceback=launcher_lost_rank(),
            exit_code=1,
        )

    def kill_tree_line(self, pid: int) -> str | None:
        """0.4's ``kill_process_tree`` logs nothing."""
        return None

    def runtime_crash(self) -> RuntimeCrash:
        """The same SIGQUIT handler as during launch, no diagnostics pause."""
        return RuntimeCrash((SIGQUIT_FROM_CHILD,), 0.0, ())
