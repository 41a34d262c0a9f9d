"""SGLang 0.5.23's log lines (November 2026): the sim's default dialect.

Every line follows tests/fixtures/realsrv/server_startup.log (a real 0.5.23
start-up) where that log has it, and 0.5.23's sources for the GPU-only lines a
CPU run never prints (CUDA-graph capture, per-rank tags, crash diagnostics).
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
from eagle_tui.core.sim.log.progress import tqdm_bar
from eagle_tui.core.sim.model.capacity import Capacity
from eagle_tui.core.sim.server_info import GPU_SERVER_ARGS

SIGQUIT_FROM_CHILD = "Received sigquit from a child process. It usually means the child failed."


class Sglang05(LogDialect):
    """SGLang 0.5.23."""

    version = "0.5"
    tag_single_rank = False
    shard_desc = "Multi-thread loading shards"

    def recorded_server_args(self) -> Mapping[str, Any]:
        """assets/sglang-0.5.23-server-args.json, resolved for a GPU."""
        return GPU_SERVER_ARGS

    def server_args_line(self, args: Mapping[str, Any]) -> str:
        """A dict repr since 0.5."""
        return f"server_args={dict(args)!r}"

    def init_lines(self, elapsed: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``Init parallel begin.`` … ``ends``, then the memory baseline."""
        return (("Init parallel begin.",),
                (f"Init parallel ends. elapsed={elapsed:.2f} s",
                 "Memory baseline taken. mem usage=0.00 GB"))

    def weight_end(self, elapsed: float, arch: str, avail: float, used: float) -> str:
        """With the elapsed time first and no dtype."""
        return (f"Load weight end. elapsed={elapsed:.2f} s, type={arch}, "
                f"avail mem={avail:.2f} GB, mem usage={used:.2f} GB.")

    def kv_allocated(self, tokens: int, k_gb: float, v_gb: float) -> str:
        """With the KV dtype and the token count."""
        return (f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, "
                f"K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB")

    def graph_begin(self, avail: float) -> str:
        """The decode graph of the target model."""
        return ("Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
                f"avail mem={avail:.2f} GB")

    def graph_bar(self, bs: int, avail: float, done: int, total: int, elapsed: float) -> str:
        """``Capturing batches (bs=8 avail_mem=… GB):  40%|████ | 2/5 […]``."""
        return tqdm_bar(f"Capturing batches (bs={bs} avail_mem={avail:.2f} GB)", done, total,
                        elapsed)

    def graph_end(self, batch_sizes: tuple[int, ...], elapsed: float, used: float,
                  avail: float) -> str:
        """Every captured batch size, time and memory."""
        sizes = ", ".join(str(bs) for bs in batch_sizes)
        return (f"Capture target decode CUDA graph end. bs=[{sizes}], elapsed={elapsed:.2f} s, "
                f"mem usage={used:.2f} GB, avail mem={avail:.2f} GB.")

    def graph_failure_hint(self) -> str:
        """0.5.23's ``CUDA_GRAPH_CAPTURE_FAILED_MSG``."""
        return ("Possible solutions:\n"
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                "3. disable torch compile by not using --enable-torch-compile\n"
                "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge "
                "performance loss)\n"
                "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")

    def scheduler_limits(self, capacity: Capacity, chunked: int, max_prefill: int,
                         avail: float) -> str:
        """With the memory left on the GPU."""
        return (f"{limits_text(capacity, chunked, max_prefill)}, "
                f"available_gpu_mem={avail:.2f} GB")

    def engine_timings(self, seconds: Mapping[str, float]) -> str | None:
        """One summary line of the phases."""
        return ("Engine startup timings (s): "
                f"load_weight={seconds.get('loading_weights', 0.0):.2f}, "
                f"kv_cache_allocation={seconds.get('allocating_kv', 0.0):.2f}, "
                f"scheduler_e2e={sum(seconds.values()):.2f}, cuda_graph={{prefill=0.00, "
                f"decode={seconds.get('capturing_graphs', 0.0):.2f}, target_verify=0.00, "
                "draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}")

    def prefill_line(self, stats: PrefillStats) -> str:
        """``Prefill batch, #new-seq: …, input throughput (token/s): …``."""
        return (f"Prefill batch, #new-seq: {stats.new_seq}, #new-token: {stats.new_tokens}, "
                f"#cached-token: {stats.cached_tokens}, token usage: {stats.token_usage:.2f}, "
                f"#running-req: {stats.running}, #queue-req: {stats.queued}, #pending-token: 0, "
                f"cpu graph: False, input throughput (token/s): {stats.input_throughput:.2f}")

    def decode_line(self, stats: DecodeStats) -> str:
        """``Decode batch, #running-req: …, gen throughput (token/s): …, #queue-req: …``."""
        return (f"Decode batch, #running-req: {stats.running}, #token: {stats.tokens}, "
                f"token usage: {stats.token_usage:.2f}, {accept_text(stats)}cpu graph: False, "
                f"gen throughput (token/s): {stats.throughput:.2f}, #queue-req: {stats.queued}")

    def child_failed(self, rank: int, exit_code: int) -> LaunchDeath:
        """The launcher's SIGQUIT handler names the rank, then kills the tree."""
        return LaunchDeath((
            SIGQUIT_FROM_CHILD,
            f"Rank {rank} scheduler died during initialization (exit code: {exit_code})",
        ))

    def rank_killed(self, rank: int, exit_code: int) -> LaunchDeath:
        """The launcher notices the dead child the same way."""
        return self.child_failed(rank, exit_code)

    def kill_tree_line(self, pid: int) -> str | None:
        """``kill_process_tree`` says what it kills."""
        return f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}"

    def runtime_crash(self) -> RuntimeCrash:
        """SIGQUIT, 5 s for GPU activity to settle, no diagnostics to take."""
        return RuntimeCrash(
            ("SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
             "Sleeping 5 seconds before crash diagnostics to let GPU activity settle."),
            5.0,
            ("No live scheduler processes found; skipping py-spy and CUDA coredump.",),
        )
