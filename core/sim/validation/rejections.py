"""The three ways SGLang 0.5.23 rejects a ``/generate`` body, each with its own 400 shape.

1. ``BodyRejected`` - FastAPI/pydantic could not parse the body:
   ``{"object":"error","message":…,"type":"Bad Request","param":null,"code":400}``.
2. ``ContractRejected`` - the JSON contract gate (unknown ``sampling_params`` key,
   wrong JSON type): ``{"error":"<serde-style text>"}``, the value a plain string.
3. ``InputRejected`` - a ``ValueError`` in the tokenizer manager (no input, ranges,
   context length, duplicate rid): ``{"error":{"message":…}}``; in a stream it is sent
   in-band instead, because the 200 status line has already gone out.
"""

from __future__ import annotations

from typing import Any


class BodyRejected(Exception):
    """Layer 1: pydantic validation of the request body failed."""

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"object": "error", "message": str(self), "type": "Bad Request", "param": None,
                "code": 400}


class ContractRejected(Exception):
    """Layer 2: the JSON contract gate refused the body."""

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"error": str(self)}


class InputRejected(Exception):
    """Layer 3: the tokenizer manager raised ``ValueError``."""

    def body(self) -> dict[str, Any]:
        """The JSON error body of a non-streaming request."""
        return {"error": {"message": str(self)}}

    def stream_body(self) -> dict[str, Any]:
        """The in-band error chunk of a streaming request."""
        return {"error": {"message": str(self), "type": "invalid_request_error", "code": 400,
                          "retryable": False}}
