"""Scalar settings read out of SGLang's ``server_args=…`` start-up line.

SGLang 0.5.23 prints the args as a dict (``server_args={'tp_size': 8, …}``); older
releases print a dataclass repr (``server_args=ServerArgs(tp_size=8, …)``). Both forms are
read with one per-key regex, so a key this module does not know about costs nothing.
"""

from __future__ import annotations

import re

# The settings that identify a deployment (see core.health.signature) or help a human
# reading a start-up diagnosis.
KEYS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "quantization",
    "kv_cache_dtype",
    "speculative_algorithm",
    "mem_fraction_static",
    "context_length",
    "load_format",
    "disable_cuda_graph",
    "enable_dp_attention",
    "attention_backend",
    "device",
    "host",
    "port",
    "nnodes",
    "node_rank",
    "base_gpu_id",
    "dist_init_addr",
)


def _key_pattern(key: str) -> re.Pattern[str]:
    return re.compile(rf"""['"]?\b{key}['"]?\s*[:=]\s*(?:'([^']*)'|"([^"]*)"|([^,)}}\s]+))""")


_PATTERNS = {key: _key_pattern(key) for key in KEYS}


def extract_server_args(text: str) -> dict[str, str]:
    """The known keys present in a ``server_args`` line, as strings (``None`` stays "None")."""
    found: dict[str, str] = {}
    for key, pattern in _PATTERNS.items():
        match = pattern.search(text)
        if match:
            found[key] = next(g for g in match.groups() if g is not None)
    return found
