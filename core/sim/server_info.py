"""The info endpoints' bodies and the ``server_args=`` start-up line.

Shapes come from the recording (``recorded``, read from ``assets/``): every key in SGLang's order,
with the values this sim knows put in place (paths, port, parallelism, limits).
Secrets are never echoed: ``api_key`` reads null, as SGLang's own dump does not
help anyone either.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.model.capacity import (
    AVAIL_BEFORE_WEIGHTS,
    CHUNKED_PREFILL_SIZE,
    GRAPH_GB,
    KV_GB,
    MAX_PREFILL_TOKENS,
    WEIGHT_GB,
    Capacity,
)
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.recorded import (
    RECORDED_HICACHE_LAYOUT,
    RECORDED_MODEL_EMBEDDING,
    RECORDED_SERVER_ARGS,
)

VERSION = "0.5.23"


def served_name(config: SimConfig) -> str:
    """``--served-model-name``, else the model path (SGLang's default)."""
    return config.served_model_name or config.model_path


# The 0.5.23 recording is a CPU run; a GPU deployment resolves these differently.
_GPU_VALUES: Final[dict[str, Any]] = {
    "dtype": "auto",
    "mem_fraction_static": 0.88,
    "disable_overlap_schedule": False,
    "device": "cuda",
    "sleep_on_idle": False,
    "attention_backend": "fa3",
    "sampling_backend": "flashinfer",
}

GPU_SERVER_ARGS: Final[dict[str, Any]] = {
    key: _GPU_VALUES.get(key, value) for key, value in RECORDED_SERVER_ARGS.items()
}
"""SGLang 0.5.23's recorded server arguments as a GPU deployment resolves them."""


def server_args(config: SimConfig, capacity: Capacity,
                recorded: Mapping[str, Any] = GPU_SERVER_ARGS) -> dict[str, Any]:
    """``recorded`` server arguments (their keys, in their order) with this run's values."""
    run_values: dict[str, Any] = {
        "model_path": config.model_path,
        "tokenizer_path": config.model_path,
        "trust_remote_code": True,
        "context_length": config.context_length,
        "max_running_requests": config.max_running_requests,
        "max_total_tokens": None,
        "chunked_prefill_size": CHUNKED_PREFILL_SIZE,
        "max_prefill_tokens": MAX_PREFILL_TOKENS,
        "tp_size": config.tp_size,
        "dist_init_addr": config.dist_init_addr,
        "nnodes": config.nnodes,
        "node_rank": config.node_rank,
        "random_seed": 1000 + config.port,
        "host": config.host,
        "port": config.port,
        "api_key": None,
        "served_model_name": served_name(config),
        "incremental_streaming_output": config.incremental_streaming_output,
        "enable_metrics": config.enable_metrics,
        "decode_log_interval": config.decode_log_interval,
        **spec_args(config),
    }
    return {key: run_values.get(key, value) for key, value in recorded.items()}


def spec_args(config: SimConfig) -> dict[str, Any]:
    """The ``speculative_*`` server arguments (all None without speculation)."""
    spec = config.spec
    if not spec.enabled:
        return {}
    return {
        "speculative_algorithm": spec.algorithm,
        "speculative_draft_model_path": spec.draft_model_path,
        "speculative_num_steps": spec.num_steps,
        "speculative_eagle_topk": spec.eagle_topk,
        "speculative_num_draft_tokens": spec.num_draft_tokens,
    }


def launch_command(config: SimConfig) -> str:
    """The flags a real launch of this server would have used."""
    parts = [f"--model-path {config.model_path}", f"--tp-size {config.tp_size}",
             "--trust-remote-code", f"--host {config.host}", f"--port {config.port}"]
    if config.context_length:
        parts.append(f"--context-length {config.context_length}")
    if config.incremental_streaming_output:
        parts.append("--incremental-streaming-output")
    if config.enable_metrics:
        parts.append("--enable-metrics")
    spec = config.spec
    if spec.enabled:
        parts += [f"--speculative-algorithm {spec.algorithm}",
                  f"--speculative-num-steps {spec.num_steps}",
                  f"--speculative-eagle-topk {spec.eagle_topk}",
                  f"--speculative-num-draft-tokens {spec.num_draft_tokens}"]
        if spec.draft_model_path:
            parts.append(f"--speculative-draft-model-path {spec.draft_model_path}")
    return " ".join(parts)


def server_info(config: SimConfig, capacity: Capacity, *, ready: bool,
                startup_seconds: dict[str, float], gen_throughput: float,
                avg_spec_accept_length: float | None = None) -> dict[str, Any]:
    """The ``/server_info`` body; ``avg_spec_accept_length`` (accepted tokens per verify
    step over the decode-log intervals so far) appears once there is one, as in SGLang."""
    args = server_args(config, capacity)
    internal = dict(args)
    internal.update({
        "world_size": config.tp_size,
        "effective_max_running_requests_per_dp": capacity.max_running_requests,
        "last_gen_throughput": gen_throughput,
        "memory_usage": {
            "weight": WEIGHT_GB, "kvcache": KV_GB, "startup_available": AVAIL_BEFORE_WEIGHTS,
            "token_capacity": capacity.max_total_num_tokens, "token_capacity_swa": None,
            "graph": {"prefill": 0.0, "decode": GRAPH_GB, "target_verify": 0.0,
                      "draft_prefill": 0.0, "draft_decode": 0.0, "draft_extend": 0.0},
        },
        "decode_cuda_graph_bs": list(capacity.capture_bs),
        "decode_cuda_graph_memory_gb": GRAPH_GB,
    })
    if config.spec.enabled and avg_spec_accept_length is not None:
        internal["avg_spec_accept_length"] = avg_spec_accept_length
    return {
        **args,
        "launch_command": launch_command(config),
        "status": "ready" if ready else "starting",
        "max_total_num_tokens": capacity.max_total_num_tokens,
        "max_req_input_len": capacity.max_req_input_len,
        "startup_time": _startup_time(startup_seconds),
        "hicache_object_layout": RECORDED_HICACHE_LAYOUT,
        "kv_events": None,
        "internal_states": [internal],
        "version": VERSION,
        "frontend": "python",
    }


def model_info(config: SimConfig, model_dir: ModelDir) -> dict[str, Any]:
    """The ``/model_info`` body (same for ``/get_model_info``)."""
    return {
        "model_path": config.model_path,
        "served_model_name": served_name(config),
        "tokenizer_path": config.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": "vision_config" in model_dir.config,
        "has_audio_understanding": False,
        "model_type": model_dir.model_type,
        "architectures": model_dir.architectures,
        "embedding": RECORDED_MODEL_EMBEDDING,
    }


def models_list(config: SimConfig, capacity: Capacity) -> dict[str, Any]:
    """The ``/v1/models`` body."""
    name = served_name(config)
    return {"object": "list", "data": [{
        "id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
        "root": name, "parent": None, "max_model_len": capacity.context_len,
    }]}


def _startup_time(seconds: dict[str, float]) -> dict[str, Any]:
    scheduler = sum(seconds.get(p, 0.0) for p in
                    ("launching", "loading_weights", "allocating_kv", "capturing_graphs"))
    return {
        "load_weight": seconds.get("loading_weights", 0.0),
        "kv_cache_allocation": seconds.get("allocating_kv", 0.0),
        "scheduler_e2e": scheduler,
        "cuda_graph": {"prefill": 0.0, "decode": seconds.get("capturing_graphs", 0.0),
                       "target_verify": 0.0, "draft_prefill": 0.0, "draft_decode": 0.0,
                       "draft_extend": 0.0},
        "tokenizer_e2e": scheduler + seconds.get("warming_up", 0.0),
    }
