"""What a person can do about each flag: one concrete next step, naming the PID to look at.

A stall names the command that shows where the stuck rank is (``py-spy dump --pid N``, the
rank's own PID when the process table knows it); an NCCL problem the debug switch and the
interconnect; a KV-cache shortage ``--mem-fraction-static``; a port conflict the holder.
"""

from __future__ import annotations

from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.steps import Step
from eagle_tui.core.proc.report import ProcessReport

EXCEPTION_STEP = "read the exception quoted here; the full traceback is in the log"
_NCCL = (
    "rerun with NCCL_DEBUG=INFO and check the interconnect between ranks and nodes "
    "(NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, NCCL_IB_HCA, firewalls; every node started "
    "with the same --dist-init-addr and its own --node-rank)"
)
_STEP_HINTS = {
    Step.DIST_BEGIN: "check that every node was started and can reach --dist-init-addr",
    Step.DIST_NCCL: _NCCL,
    Step.DIST_COMM: _NCCL,
    Step.DIST_ALLREDUCE: _NCCL + "; or try --disable-custom-all-reduce",
    Step.DIST_END: _NCCL,
    Step.WEIGHTS_BEGIN: "check the model path and config; big models take a while to build",
    Step.WEIGHTS_FILES: "check the download (HF cache, HF_TOKEN, network) and disk reads",
    Step.WEIGHTS_BAR: "check disk or network reads of the checkpoint",
    Step.WEIGHTS_BAR_DONE: "weight post-processing (quantization) runs on the GPU: check its load",
    Step.WEIGHTS_END: "the other ranks are still loading: check their disks and GPUs",
    Step.GRAPHS_BEGIN: (
        "kernels may be JIT-compiling; confirm with --disable-cuda-graph or a smaller "
        "--cuda-graph-max-bs"
    ),
    Step.GRAPHS_BAR: (
        "kernels may be JIT-compiling (FlashInfer/DeepGEMM); confirm with "
        "--disable-cuda-graph or a smaller --cuda-graph-max-bs"
    ),
    Step.WARMUP: (
        "the warm-up request is stuck: try --disable-custom-all-reduce; if it got a 502/503, "
        "a proxy answered (set NO_PROXY=127.0.0.1,localhost)"
    ),
}
_FATAL_HINTS = {
    "nccl": _NCCL,
    "dist_timeout": "the other ranks never joined: check the other nodes' logs, then " + _NCCL,
    "cuda_error": (
        "the kernels do not fit this GPU or driver (no kernel image / invalid device "
        "function): install a build for this GPU, or pick another --attention-backend"
    ),
    "graph_capture_failed": (
        "retry with --disable-cuda-graph to confirm, then lower --cuda-graph-max-bs"
    ),
    "watchdog_timeout": (
        "a rank hung for the whole watchdog period: read the stack dump above; try "
        "--disable-custom-all-reduce"
    ),
    "fatal_signal": "a native crash: check dmesg and the driver, and the stack dump above",
    "native_backtrace": "a native crash: check dmesg and the driver, and the stack dump above",
    "killed": "killed by the kernel, most likely its OOM killer: dmesg -T | grep -i oom",
    "init_failed": (
        "the warm-up request failed: if it got 502/503, a proxy answered (set "
        "NO_PROXY=127.0.0.1,localhost); else read the exception"
    ),
    "health_check_failed": "the detokenizer stopped answering: read its last lines",
}


def pid_for_rank(process: ProcessReport | None, rank: str | None) -> int | None:
    """The PID of rank ``rank`` (``sglang::scheduler_TP3``), else the server's own."""
    if process is None:
        return None
    if rank:
        tag = rank.replace(" ", "_")
        for child in process.children:
            if child.name.endswith(tag) or child.name.endswith(rank.split()[-1]):
                return child.pid
    return process.pid


def _dump(process: ProcessReport | None, rank: str | None) -> str:
    pid = pid_for_rank(process, rank)
    target = f"--pid {pid}" if pid is not None else "--pid <server PID>"
    whose = f" ({rank})" if rank and pid is not None and process and pid != process.pid else ""
    return f"py-spy dump {target}{whose} to see where it waits"


def stall_step(c: TickContext, step: Step, lagging: tuple[str, ...]) -> str:
    """What to do about a stall at ``step``."""
    first = lagging[0] if lagging else None
    hint = _STEP_HINTS.get(step, "")
    return "; ".join(p for p in (_dump(c.process, first), hint) if p)


def fatal_step(kind: str, line: str, exit_code: int | None) -> str:
    """What to do about a fatal line of ``kind``."""
    if kind == "oom":
        return _oom(line)
    if kind in ("address_in_use", "port_in_use"):
        return "stop whatever holds the port (see the holder), or start on another --port"
    if exit_code == -9 or (exit_code == 137 and kind != "killed"):
        return _FATAL_HINTS["killed"]
    return _FATAL_HINTS.get(kind, EXCEPTION_STEP)


def _oom(line: str) -> str:
    if "mem-fraction-static" in line or "KV cache" in line:
        return (
            "the KV cache does not fit: raise --mem-fraction-static (or lower --context-length "
            "/ --max-total-tokens); with speculative decoding the draft weights count too"
        )
    return (
        "GPU memory ran out: check nothing else holds the GPU, lower --mem-fraction-static "
        "or --cuda-graph-max-bs, or spread the model over more GPUs (--tp)"
    )


def port_step(holder_pid: int | None, holder: str) -> str:
    """What to do about another process on the port."""
    if holder_pid is None:
        return "find what listens on the port (ss -ltnp) and stop it, or use another --port"
    return f"stop {holder} (kill {holder_pid}), or start the server on another --port"


def exit_step(exit_code: int | None) -> str:
    """What to do about a process that ended with no error line."""
    if exit_code == -9:
        return _FATAL_HINTS["killed"]
    return (
        "the log has no error line: check dmesg (OOM killer) and where the server's stderr "
        "goes; rerun in the foreground to see its last words"
    )


SLOW_STEP = "compare the timeline with earlier starts; if nothing moves, a stall flag follows"
SLOW_STALLED_STEP = "it has stopped moving: the stall flag says where, and what to do"
DEGRADED_STEP = "check its load (queue, KV usage); py-spy dump the scheduler if it stays so"
RANK_EXITED_STEP = "a rank died while the server lives: read its last lines; -9 = OOM killer"
GPU_HELD_STEP = "free the GPU: stop the process holding it (nvidia-smi shows it)"
