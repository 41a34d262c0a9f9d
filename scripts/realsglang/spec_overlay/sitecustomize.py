"""eagle-tui's speculative-decoding overlay for the CPU test server (not part of SGLang).

``realsglang.sh start-spec`` puts this folder first on ``PYTHONPATH`` with
``EAGLE_REALSGLANG_SPEC_OVERLAY=1``, so every Python process of the server (the HTTP server and
the scheduler and detokenizer it spawns) runs this at start-up and gets two changes:

1. the CPU spec-decoding ops of ``cpu_spec_kernels`` are attached to eagle-tui's
   ``sgl_kernel`` shim (a real CPU build of sgl-kernel, when installed, is left alone);
2. the ``torch_native`` attention backend runs a verify batch as a causal extend of the
   draft tokens after the verified prefix. SGLang hands that backend no prefix lengths for a
   verify batch; the causal mask is exact for a chain of drafts only, so the server must run
   NGRAM with ``--speculative-ngram-max-bfs-breadth 1`` (``start-spec`` passes it).

Any failure is printed and leaves SGLang as it was: the server then fails loudly at the
first op it lacks rather than computing something wrong.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any


def _attach_kernels() -> None:
    import cpu_spec_kernels
    import sgl_kernel

    if "eagle-tui-shim" not in str(getattr(sgl_kernel, "__version__", "")):
        return  # a real CPU build of sgl-kernel has its own ops
    for op in cpu_spec_kernels.TOP_LEVEL_OPS:
        setattr(sgl_kernel, op.__name__, op)
    speculative = types.ModuleType("sgl_kernel.speculative")
    for op in cpu_spec_kernels.SPECULATIVE_OPS:
        setattr(speculative, op.__name__, op)
    sys.modules["sgl_kernel.speculative"] = speculative
    sgl_kernel.speculative = speculative  # type: ignore[attr-defined]


def _verify_as_causal_extend() -> None:
    import torch
    from sglang.srt.layers.attention import torch_native_backend as backend

    original = backend.TorchNativeAttnBackend._run_sdpa_forward_extend

    def run(self: Any, query: torch.Tensor, output: torch.Tensor, k_cache: torch.Tensor,
            v_cache: torch.Tensor, req_to_token: torch.Tensor, req_pool_indices: torch.Tensor,
            seq_lens: torch.Tensor, extend_prefix_lens: torch.Tensor | None,
            extend_seq_lens: torch.Tensor | None, *args: Any, **kwargs: Any) -> torch.Tensor:
        if extend_prefix_lens is None:  # a verify batch: seq_lens are the verified prefixes
            drafts = query.shape[0] // seq_lens.shape[0]
            extend_prefix_lens = seq_lens.clone()
            extend_seq_lens = torch.full_like(seq_lens, drafts)
            seq_lens = seq_lens + drafts
        return original(self, query, output, k_cache, v_cache, req_to_token, req_pool_indices,
                        seq_lens, extend_prefix_lens, extend_seq_lens, *args, **kwargs)

    backend.TorchNativeAttnBackend._run_sdpa_forward_extend = run


if os.environ.get("EAGLE_REALSGLANG_SPEC_OVERLAY") == "1":
    for _step in (_attach_kernels, _verify_as_causal_extend):
        try:
            _step()
        except Exception as error:  # report, never stop the interpreter from starting
            print(f"eagle-tui spec overlay: {_step.__name__} failed: {error!r}", file=sys.stderr)
