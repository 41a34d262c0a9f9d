"""Client for SGLang's native HTTP API (``/generate`` with ``input_ids``, health, info, abort)."""

from eagle_tui.core.sglang.client import API_KEY_ENV, ClientTimeouts, SGLangClient
from eagle_tui.core.sglang.types import (
    FinishReason,
    GenerateRequest,
    GenerateResult,
    HealthResult,
    ModelInfo,
    SamplingParams,
    ServerInfo,
    TokenDelta,
)

__all__ = [
    "API_KEY_ENV",
    "ClientTimeouts",
    "FinishReason",
    "GenerateRequest",
    "GenerateResult",
    "HealthResult",
    "ModelInfo",
    "SGLangClient",
    "SamplingParams",
    "ServerInfo",
    "TokenDelta",
]
