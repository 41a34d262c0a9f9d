"""Python tracebacks as SGLang 0.5.23 prints them when something breaks.

Frames are (file under site-packages, line, function, source line, expression to
underline); the text is rendered the way Python 3.12 does, ``^^^`` markers
included, so log parsers meet the real thing.
"""

from __future__ import annotations

from typing import Final

SITE: Final = "/usr/local/lib/python3.12/dist-packages"

Frame = tuple[str, int, str, str, str]  # file, line, function, code, underlined expression

_SCHEDULER_LOOP: Final[tuple[Frame, ...]] = (
    ("sglang/srt/managers/scheduler.py", 6368, "run_scheduler_process",
     "scheduler.run_event_loop()", ""),
    ("sglang/srt/managers/scheduler.py", 2010, "run_event_loop", "dispatch_event_loop(self)", ""),
    ("sglang/srt/managers/scheduler.py", 6215, "dispatch_event_loop",
     "return _dispatch_event_loop_once(scheduler)", "_dispatch_event_loop_once(scheduler)"),
    ("sglang/srt/managers/scheduler.py", 6233, "_dispatch_event_loop_once",
     "scheduler.event_loop_normal()", ""),
    ("torch/utils/_contextlib.py", 124, "decorate_context", "return func(*args, **kwargs)",
     "func(*args, **kwargs)"),
    ("sglang/srt/managers/scheduler.py", 2048, "event_loop_normal",
     "result = self.run_batch(batch)", "self.run_batch(batch)"),
    ("sglang/srt/managers/scheduler.py", 4870, "run_batch",
     "batch_result = self.model_worker.forward_batch_generation(",
     "self.model_worker.forward_batch_generation("),
    ("sglang/srt/managers/tp_worker.py", 675, "forward_batch_generation",
     "out = self.model_runner.forward(", "self.model_runner.forward("),
    ("sglang/srt/model_executor/model_runner.py", 1860, "forward",
     "output = self._forward_raw(", "self._forward_raw("),
)

_EMBEDDING_FAILURE: Final[tuple[Frame, ...]] = (
    ("sglang/srt/model_executor/model_runner.py", 2063, "_forward_raw",
     "ret = self.eager_runner.execute(", "self.eager_runner.execute("),
    ("sglang/srt/model_executor/runner/eager_runner.py", 226, "execute",
     "return self._execute_extend(forward_batch, pp_proxy_tensors)",
     "self._execute_extend(forward_batch, pp_proxy_tensors)"),
    ("sglang/srt/model_executor/runner/eager_runner.py", 361, "_execute_extend",
     "ret = model_runner.model.forward(", "model_runner.model.forward("),
    ("sglang/srt/models/deepseek_v2.py", 3217, "forward", "hidden_states = self.model(",
     "self.model("),
    ("torch/nn/modules/module.py", 1783, "_wrapped_call_impl",
     "return self._call_impl(*args, **kwargs)", "self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1794, "_call_impl", "return forward_call(*args, **kwargs)",
     "forward_call(*args, **kwargs)"),
    ("sglang/srt/models/deepseek_v2.py", 2984, "forward",
     "hidden_states = self.embed_tokens(input_ids)", "self.embed_tokens(input_ids)"),
    ("sglang/srt/layers/vocab_parallel_embedding.py", 521, "forward",
     "output_parallel = self._embed_local_shard(input_)", "self._embed_local_shard(input_)"),
    ("sglang/srt/layers/vocab_parallel_embedding.py", 481, "_embed_local_shard",
     "output_parallel = self.quant_method.embedding(self, input_.long())",
     "self.quant_method.embedding(self, input_.long())"),
    ("sglang/srt/layers/quantization/unquant.py", 540, "embedding",
     "return F.embedding(input_, layer.weight)", "F.embedding(input_, layer.weight)"),
    ("torch/nn/functional.py", 2621, "embedding",
     "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)",
     "torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)"),
)

_CUDA_FAILURE: Final[tuple[Frame, ...]] = (
    ("sglang/srt/model_executor/model_runner.py", 2041, "_forward_raw",
     "ret = self.graph_runner.replay(", "self.graph_runner.replay("),
    ("sglang/srt/model_executor/cuda_graph_runner.py", 1012, "replay",
     "self.graphs[self.bs].replay()", ""),
)

_GRAPH_CAPTURE: Final[tuple[Frame, ...]] = (
    ("sglang/srt/model_executor/model_runner.py", 2412, "init_device_graphs",
     "self.graph_runner = CudaGraphRunner(self)", "CudaGraphRunner(self)"),
    ("sglang/srt/model_executor/cuda_graph_runner.py", 402, "__init__",
     "self.capture()", ""),
    ("sglang/srt/model_executor/cuda_graph_runner.py", 531, "capture",
     ") = self.capture_one_batch_size(bs, forward)", "self.capture_one_batch_size(bs, forward)"),
)

_MODEL_LOAD: Final[tuple[Frame, ...]] = (
    ("sglang/srt/managers/scheduler.py", 6351, "run_scheduler_process",
     "scheduler = Scheduler(", "Scheduler("),
    ("sglang/srt/managers/tp_worker.py", 254, "__init__",
     "self._model_runner = ModelRunner(", "ModelRunner("),
    ("sglang/srt/model_executor/model_runner.py", 412, "initialize",
     "self.load_model()", ""),
    ("sglang/srt/model_loader/loader.py", 694, "load_weights_and_postprocess",
     "model.load_weights(weights)", ""),
)

_DIST_INIT: Final[tuple[Frame, ...]] = (
    ("sglang/srt/managers/scheduler.py", 6351, "run_scheduler_process",
     "scheduler = Scheduler(", "Scheduler("),
    ("sglang/srt/model_executor/model_runner.py", 688, "init_torch_distributed",
     "initialize_model_parallel(", "initialize_model_parallel("),
    ("torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)",
     "func(*args, **kwargs)"),
    ("torch/distributed/distributed_c10d.py", 4697, "barrier",
     "work = group.barrier(opts=opts)", "group.barrier(opts=opts)"),
)

_KV_POOL: Final[tuple[Frame, ...]] = (
    ("sglang/srt/managers/scheduler.py", 6351, "run_scheduler_process",
     "scheduler = Scheduler(", "Scheduler("),
    ("sglang/srt/model_executor/model_runner.py", 1402, "init_memory_pool",
     "raise RuntimeError(", ""),
)


def render(frames: tuple[Frame, ...], exception: str) -> str:
    """A ``Traceback (most recent call last):`` block ending with ``exception``."""
    lines = ["Traceback (most recent call last):"]
    for path, line, function, code, expression in frames:
        where = path if path.startswith("/") else f"{SITE}/{path}"  # absolute: stdlib frames
        lines.append(f'  File "{where}", line {line}, in {function}')
        lines.append(f"    {code}")
        if expression and expression != code:
            column = code.index(expression)
            lines.append(" " * (4 + column) + "^" * len(expression))
    lines.append(exception)
    return "\n".join(lines)


def out_of_vocab() -> str:
    """The recorded scheduler crash of an input id >= vocab_size."""
    return render(_SCHEDULER_LOOP + _EMBEDDING_FAILURE, "IndexError: index out of range in self")


def illegal_memory_access() -> str:
    """A scheduler crash mid-run (what a dying GPU looks like)."""
    return render(
        _SCHEDULER_LOOP + _CUDA_FAILURE,
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    )


def weights_corrupt() -> str:
    """A weight shard that cannot be read."""
    return render(_MODEL_LOAD, "safetensors_rust.SafetensorError: Error while deserializing "
                               "header: MetadataIncompleteBuffer")


def not_enough_memory() -> str:
    """The KV pool does not fit."""
    return render(_KV_POOL, "RuntimeError: Not enough memory. Please try to increase "
                            "--mem-fraction-static. Current value: mem_fraction_static=0.88")


def graph_capture_failed(reason: str, hint: str) -> str:
    """CUDA-graph capture failed (SGLang wraps the cause and its version's ``hint``)."""
    return render(_GRAPH_CAPTURE, f"Exception: Capture cuda graph failed: {reason}\n{hint}")


def cuda_oom(gpu: int) -> str:
    """torch's CUDA out-of-memory text."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU {gpu} "
            "has a total capacity of 79.19 GiB of which 1.02 GiB is free. Process 48213 has "
            "78.16 GiB memory in use. Of the allocated memory 74.60 GiB is allocated by "
            "PyTorch, and 1.93 GiB is reserved by PyTorch but unallocated.")


def nccl_failure() -> str:
    """An NCCL error during distributed initialisation."""
    return render(_DIST_INIT, "torch.distributed.DistBackendError: NCCL error in: "
                              "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
                              "unhandled system error (run with NCCL_DEBUG=INFO for details), "
                              "NCCL version 2.27.3\n"
                              "ncclSystemError: System call (e.g. socket, malloc) or external "
                              "library call failed or device error.\n"
                              "Last error:\n"
                              "socketStartConnect: Connect to 10.0.0.12<43557> failed : "
                              "Software caused connection abort")


def launch_failure() -> str:
    """The main process failing before any scheduler started."""
    frames: tuple[Frame, ...] = (
        ("sglang/launch_server.py", 32, "<module>", "run_server(server_args)", ""),
        ("sglang/srt/entrypoints/http_server.py", 1915, "launch_server",
         "tokenizer_manager, template_manager, scheduler_info, port_args = _launch_subprocesses(",
         "_launch_subprocesses("),
        ("sglang/srt/entrypoints/engine.py", 912, "_launch_subprocesses",
         "scheduler_procs, scheduler_pipe_readers = launch_scheduler_processes(",
         "launch_scheduler_processes("),
    )
    return render(frames, "RuntimeError: Failed to initialize the scheduler processes: "
                          "CUDA driver initialization failed, you might not have a CUDA gpu.")


def launcher_lost_rank() -> str:
    """SGLang 0.4's launcher reading EOF from a dead rank's pipe (Python 3.10: no ``^``)."""
    stdlib = "/usr/lib/python3.10/multiprocessing/connection.py"
    frames: tuple[Frame, ...] = (
        ("/usr/local/lib/python3.10/dist-packages/sglang/launch_server.py", 14, "<module>",
         "launch_server(server_args)", ""),
        ("/usr/local/lib/python3.10/dist-packages/sglang/srt/entrypoints/http_server.py", 465,
         "launch_server", "tokenizer_manager, scheduler_info = _launch_subprocesses(", ""),
        ("/usr/local/lib/python3.10/dist-packages/sglang/srt/entrypoints/engine.py", 441,
         "_launch_subprocesses", "data = scheduler_pipe_readers[i].recv()", ""),
        (stdlib, 250, "recv", "buf = self._recv_bytes()", ""),
        (stdlib, 414, "_recv_bytes", "buf = self._recv(4)", ""),
        (stdlib, 383, "_recv", "raise EOFError", ""),
    )
    return render(frames, "EOFError")
