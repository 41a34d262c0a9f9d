"""The catalogue of places a start-up gets stuck, as frames of real Python stacks.

Each entry names a place in the words a person uses and the frames that show it: a
function name (py-spy prints qualified names, ``TCPStore.__init__``; either form matches)
and/or a fragment of the file path. The frames come from the code that runs: SGLang 0.5.23
(``sglang/srt/...``), torch 2.14 (``torch/distributed/rendezvous.py``
``_create_c10d_store``, ``distributed_c10d.py`` ``init_process_group``/``barrier``…),
FlashInfer (``flashinfer/jit/core.py`` ``build_and_load``, ``cpp_ext.py`` ``run_ninja``),
DeepGEMM (``deep_gemm_wrapper/compile_utils.py`` ``_compile_deep_gemm_one_type_all``),
tvm-ffi and SGLang's own JIT (``sglang/kernels/jit/utils/compile/loader.py`` ``load_jit``,
``_build_lock``), triton, inductor, filelock, huggingface_hub, and the real dumps recorded in
``tests/fixtures/pyspy``.

``PHASES`` are the steps of SGLang's start-up a stack passes through (``load_model`` →
``load_weights``); they give the path to a stuck point ("TP7 in load_weights → reading
weights"). ``POINTS`` are the stuck points themselves, the innermost meaningful frame; the
first entry that matches, walking from the innermost frame out, wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Point(StrEnum):
    """What a stack waits on or works at."""

    PEERS = "peers"
    COMMUNICATOR = "communicator"
    COLLECTIVE = "collective"
    WEIGHTS = "weights"
    DOWNLOAD = "download"
    JIT = "jit"
    GRAPH_CAPTURE = "graph capture"
    FILE_LOCK = "file lock"
    RETRY_SLEEP = "retry sleep"
    TOKENIZER = "tokenizer"
    SUBPROCESS = "subprocess"
    CHILDREN = "children"
    IMPORTING = "importing"
    SERVING = "serving"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Entry:
    """One catalogue line: ``words`` for the frames that match ``functions`` (any, when
    empty) in a file containing one of ``files`` (any file, when empty). ``waiting``: it
    waits on something outside the process (another rank, a lock, a disk) rather than
    working; ``stuck``: a start-up stopping here is worth a flag (False for a server idle
    between requests)."""

    point: Point
    words: str
    functions: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    waiting: bool = True
    stuck: bool = True

    def matches(self, function: str, filename: str) -> bool:
        """Whether a frame (py-spy's function name, full file path) is this entry's.

        py-spy prints qualified names (``DefaultModelLoader.load_model``,
        ``buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file``): any
        dotted part may match, so a nested helper counts as its enclosing function.
        """
        named = function in self.functions or any(
            part in self.functions for part in function.split(".")
        )
        if self.functions and not named:
            return False
        return not self.files or any(part in filename for part in self.files)


def _names(*names: str) -> frozenset[str]:
    return frozenset(names)


_COLLECTIVES = _names(
    "barrier", "monitored_barrier", "all_reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather_object",
    "broadcast_object_list", "broadcast_object", "broadcast_tensor_dict", "send", "recv",
    "send_object_list", "recv_object_list",
)  # fmt: skip
_WEIGHT_ITERATORS = _names(
    "safetensors_weights_iterator", "multi_thread_safetensors_weights_iterator",
    "buffered_multi_thread_safetensors_weights_iterator", "fastsafetensors_weights_iterator",
    "runai_safetensors_weights_iterator", "instanttensor_weights_iterator",
    "pt_weights_iterator", "multi_thread_pt_weights_iterator", "np_cache_weights_iterator",
    "gguf_quant_weights_iterator", "_prefetch_all_checkpoints",
)  # fmt: skip
_JIT = (
    ("JIT compiling (FlashInfer)", ("flashinfer/jit/",)),
    ("JIT compiling (DeepGEMM)", ("/deep_gemm/", "deep_gemm_wrapper/compile_utils")),
    ("JIT compiling (tvm-ffi)", ("tvm_ffi/cpp/", "sglang/kernels/jit/")),
    ("JIT compiling (triton)", ("triton/compiler/", "triton/runtime/", "triton/backends/")),
    ("JIT compiling (torch.compile / inductor)", ("torch/_inductor/", "torch/_dynamo/")),
    ("JIT compiling (torch C++ extension)", ("torch/utils/cpp_extension.py",)),
)
_LOCKS = ("sglang/kernels/jit/utils/compile/loader.py", "deep_gemm_wrapper/compile_utils",
          "torch/utils/file_baton.py")  # fmt: skip
_DIST = ("torch/distributed/",)
_SGL_DIST = ("torch/distributed/", "sglang/srt/distributed/")

# fmt: off
POINTS: tuple[Entry, ...] = (
    # a lock file another process holds: filelock polls with time.sleep inside acquire();
    # SGLang's JIT and DeepGEMM block in fcntl.flock inside their lock context managers
    Entry(Point.FILE_LOCK, "waiting on a file lock (filelock; a stale JIT cache lock?)",
          _names("acquire", "_acquire", "_poll_until_acquired", "_acquire_level"),
          ("filelock/",)),
    Entry(Point.FILE_LOCK, "waiting on a file lock (a JIT build another rank runs?)",
          _names("_build_lock", "_local_rank_compile_lock", "wait"), _LOCKS),
    # node 0's rank 0 hosts the TCPStore and waits in _create_c10d_store for every rank
    # (recorded: tests/fixtures/pyspy/peers); the others wait connecting to it
    Entry(Point.PEERS, "waiting for peers: torch.distributed rendezvous (TCPStore)",
          _names("_create_c10d_store", "_tcp_rendezvous_handler", "_env_rendezvous_handler",
                 "_rendezvous_helper", "rendezvous"), ("torch/distributed/rendezvous.py",)),
    Entry(Point.PEERS, "waiting for peers: store-based barrier", _names("_store_based_barrier"),
          _DIST),
    Entry(Point.COMMUNICATOR, "creating NCCL communicators",
          files=("device_communicators/pynccl", "/nccl/", "pynccl_wrapper")),
    Entry(Point.COMMUNICATOR, "creating communicators (NCCL/gloo process groups)",
          _names("_new_process_group_helper", "new_group", "_new_group_with_tag",
                 "init_process_group", "_get_default_group"), _DIST),
    Entry(Point.COLLECTIVE, "in a collective", _COLLECTIVES, _SGL_DIST),
    Entry(Point.DOWNLOAD, "downloading from a model hub",
          files=("huggingface_hub/", "modelscope/", "hf_transfer", "hf_xet")),
    Entry(Point.DOWNLOAD, "downloading from a model hub",
          _names("download_weights_from_hf", "snapshot_download", "hf_hub_download")),
    # recorded: tests/fixtures/pyspy/fifo (a loader thread blocked opening the shard)
    Entry(Point.WEIGHTS, "reading weights", _WEIGHT_ITERATORS, ("model_loader/",)),
    Entry(Point.WEIGHTS, "reading weights (safetensors)", files=("safetensors/",)),
    Entry(Point.WEIGHTS, "reading weights (torch.load)",
          _names("load", "_load", "_legacy_load", "persistent_load", "load_tensor"),
          ("torch/serialization.py",)),
    *(Entry(Point.JIT, words, files=files, waiting=False) for words, files in _JIT),
    Entry(Point.GRAPH_CAPTURE, "capturing CUDA graphs",
          _names("capture", "_capture", "capture_one_shape", "capture_one_batch_size",
                 "_capture_one_stream", "capture_begin", "capture_end", "_capture_graph"),
          ("graph_runner", "torch/cuda/graphs.py", "cuda_graph"), waiting=False),
    Entry(Point.RETRY_SLEEP, "sleeping in a retry loop (tenacity)", files=("tenacity/",)),
    Entry(Point.RETRY_SLEEP, "waiting for a port to be free (another process holds it)",
          _names("wait_port_available"), ("sglang/srt/utils/",)),
    # recorded: the stop case, a rank stopped while loading its tokenizer
    Entry(Point.TOKENIZER, "loading the tokenizer",
          files=("transformers/tokenization", "transformers/models/auto/tokenization_auto",
                 "hf_transformers/tokenizer.py", "tokenizers/"), waiting=False),
    Entry(Point.SUBPROCESS, "waiting for a subprocess",
          _names("run", "communicate", "wait", "_wait", "_try_wait", "check_output",
                 "check_call", "call"), ("subprocess.py",)),
    Entry(Point.IMPORTING, "importing modules",
          _names("_find_and_load", "_find_and_load_unlocked", "_load_unlocked",
                 "exec_module", "_call_with_frames_removed"), waiting=False, stuck=False),
    # recorded: the launcher of every case but plain (waits on its ranks' pipes)
    Entry(Point.CHILDREN, "waiting for the scheduler processes to report ready",
          _names("_wait_for_scheduler_ready", "wait_for_scheduler_ready", "wait_for_ready"),
          ("sglang/srt/entrypoints/",), stuck=False),
    # recorded: plain (scheduler idle in event_loop_normal, detokenizer in event_loop,
    # launcher in uvicorn, multiprocessing's resource tracker)
    Entry(Point.SERVING, "idle, waiting for requests",
          _names("event_loop_normal", "event_loop_overlap", "event_loop_pp", "event_loop",
                 "run_event_loop"), ("sglang/srt/managers/",), stuck=False),
    Entry(Point.SERVING, "serving HTTP (uvicorn)", files=("uvicorn/",), stuck=False),
    Entry(Point.SERVING, "multiprocessing's resource tracker",
          files=("multiprocessing/resource_tracker.py",), stuck=False),
)

PHASES: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("distributed init", _names("init_torch_distributed", "init_distributed_environment",
                                "initialize_model_parallel", "init_parallel_runtime",
                                "_init_parallel_groups"), ("sglang/srt/",)),
    ("load_model", _names("load_model"), ("sglang/srt/model_executor/", "model_loader/")),
    ("load_weights", _names("load_weights", "load_weights_and_postprocess"),
     ("sglang/srt/models/", "model_loader/")),
    ("KV cache", _names("init_memory_pool"), ("sglang/srt/",)),
    ("CUDA graphs", _names("init_cuda_graphs", "init_device_graphs"), ("sglang/srt/",)),
    ("warm-up", _names("_execute_server_warmup", "_wait_and_warmup"), ("sglang/srt/",)),
)
# fmt: on
"""Start-up steps a stack passes through: (words, functions, files)."""


IMPORTING = next(e for e in POINTS if e.point is Point.IMPORTING)


def point_of(function: str, filename: str) -> Entry | None:
    """The first catalogue entry a frame matches."""
    return next((e for e in POINTS if e.matches(function, filename)), None)


def phase_of(function: str, filename: str) -> str | None:
    """The start-up step a frame belongs to, if it is one."""
    parts = function.split(".")
    for words, functions, files in PHASES:
        if any(p in functions for p in parts) and any(f in filename for f in files):
            return words
    return None
