"""A pure-PyTorch stand-in for the CPU build of ``sgl_kernel``, for eagle-tui's test server.

SGLang's CPU engine (``--device cpu``, ``SGLANG_USE_CPU_ENGINE=1``) imports helper ops from
the CPU build of sgl-kernel. That build is not on PyPI (it is compiled from source, for Xeon
CPUs with AVX-512/AMX), and PyPI's ``sglang-kernel`` wheel is the CUDA build, which does not
import without ``libcuda.so.1``. On a CPU without AMX, SGLang already falls back to plain
torch for norms, activations and linear layers; the plain prefill/decode path of a small
float32 Llama needs one op from here, ``assign_req_to_token_pool_cpu``, written below with
torch indexing. Every other name imports fine (SGLang does ``from sgl_kernel import X`` at
module level) but raises ``NotImplementedError`` when called, so a feature that needs a real
kernel (speculative decoding, HiCache, quantized or Mamba models, the ``intel_amx`` attention
backend) fails loudly instead of computing something wrong.

scripts/realsglang/realsglang.sh copies this package into the SGLang venv's site-packages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import torch

__version__ = "0.0.0+eagle-tui-shim"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int | None = None,
) -> None:
    """Write each request's new KV-cache slots into its row of the req -> token table.

    Request ``i`` (row ``req_pool_indices[i]``) gets positions ``start_offset[i]`` up to
    ``end_offset[i]``; their slots are the next ``end - start`` entries of ``out_cache_loc``,
    which holds the slots of all requests back to back.
    """
    del pool_len  # the table's width; plain indexing does not need it
    taken = 0
    for row, start, end in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        count = end - start
        if count > 0:
            req_to_token[row, start:end] = out_cache_loc[taken : taken + count].to(
                req_to_token.dtype
            )
        taken += count


def _missing(name: str) -> Callable[..., NoReturn]:
    def missing(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"sgl_kernel.{name}: not in eagle-tui's CPU shim (the real CPU build of "
            "sgl-kernel is not installed)"
        )

    missing.__name__ = name
    return missing


def __getattr__(name: str) -> Callable[..., NoReturn]:
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(name)
