"""Layer 2 of ``/generate`` validation: SGLang 0.5.23's JSON contract gate.

SGLang decodes the raw JSON with types generated from its proto schema
(``api/v1/api_types.py``). Unknown top-level keys are ignored, unknown
``sampling_params`` keys are refused, and JSON types are strict (``2.0`` is not
an integer, ``"5"`` is not a number). Messages are serde's, e.g.
``unknown field `foo`, expected one of `max_new_tokens`, …`` and
``invalid type: floating point `2.0`, expected i64``. Keys are checked in the
order the body lists them, so the first offending key is the one reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from eagle_tui.core.sim.validation.rejections import ContractRejected

SAMPLING_FIELDS: Final = (
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k",
    "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n",
    "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias",
    "sampling_seed", "custom_params", "beam_width", "watermark", "choice",
)
"""Keys the contract accepts inside ``sampling_params``, in the schema's order."""

Decoder = Callable[[Any], None]


def check_contract(body: dict[str, Any]) -> None:
    """Raise ContractRejected when ``body`` violates the contract."""
    for key, value in body.items():
        decoder = _TOP_LEVEL.get(key)
        if decoder is not None and value is not None:
            decoder(value)


def unexpected(value: Any) -> str:
    """serde's ``Unexpected`` wording for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    return "sequence" if isinstance(value, list) else "map"


def _invalid(value: Any, expected: str) -> ContractRejected:
    return ContractRejected(f"invalid type: {unexpected(value)}, expected {expected}")


def _int(expected: str) -> Decoder:
    def decode(value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _invalid(value, expected)

    return decode


def _float(value: Any) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _invalid(value, "f64")


def _bool(expected: str = "a boolean") -> Decoder:
    def decode(value: Any) -> None:
        if not isinstance(value, bool):
            raise _invalid(value, expected)

    return decode


def _str(expected: str = "a string") -> Decoder:
    def decode(value: Any) -> None:
        if not isinstance(value, str):
            raise _invalid(value, expected)

    return decode


def _seq(element: Decoder) -> Decoder:
    def decode(value: Any) -> None:
        if not isinstance(value, list):
            raise _invalid(value, "a sequence")
        for item in value:
            element(item)

    return decode


def _one_or_list(one: Decoder, element: Decoder) -> Decoder:
    def decode(value: Any) -> None:
        if isinstance(value, list):
            _seq(element)(value)
        else:
            one(value)

    return decode


def _token_ids_or_list(value: Any) -> None:
    if not isinstance(value, list):
        raise _invalid(value, "a value or an array of values for TokenIdsOrList")
    # [] and [number, ...] are one prompt; anything else is a batch of prompts.
    if not value or _is_number(value[0]):
        _seq(_int("i64"))(value)
    else:
        _seq(_seq(_int("i64")))(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _logit_bias(value: Any) -> None:
    if not isinstance(value, dict):
        raise _invalid(value, "a map")
    for item in value.values():
        _float(item)


def _sampling_params(value: Any) -> None:
    if not isinstance(value, dict):
        raise _invalid(value, "struct SamplingParams")
    for key, item in value.items():
        if key not in _SAMPLING:
            listed = ", ".join(f"`{name}`" for name in SAMPLING_FIELDS)
            raise ContractRejected(f"unknown field `{key}`, expected one of {listed}")
        decoder = _SAMPLING[key]
        if item is not None and decoder is not None:
            decoder(item)


def _sampling_params_or_list(value: Any) -> None:
    if isinstance(value, list):
        _seq(_sampling_params)(value)
    elif isinstance(value, dict):
        _sampling_params(value)
    else:
        raise _invalid(value, "a value or an array of values for SamplingParamsOrList")


_STRING_OR_LIST: Final = _one_or_list(_str("a value or an array of values for StringOrList"),
                                      _str())

_SAMPLING: Final[dict[str, Decoder | None]] = {
    "max_new_tokens": _int("i64"),
    "stop": _STRING_OR_LIST,
    "stop_token_ids": _seq(_int("i64")),
    "stop_regex": _STRING_OR_LIST,
    "temperature": _float,
    "top_p": _float,
    "top_k": _int("i64"),
    "min_p": _float,
    "frequency_penalty": _float,
    "presence_penalty": _float,
    "repetition_penalty": _float,
    "min_new_tokens": _int("i64"),
    "n": _int("i64"),
    "json_schema": _str(),
    "regex": _str(),
    "ebnf": _str(),
    "structural_tag": _str(),
    "ignore_eos": _bool(),
    "skip_special_tokens": _bool(),
    "spaces_between_special_tokens": _bool(),
    "no_stop_trim": _bool(),
    "stream_interval": _int("i64"),
    "logit_bias": _logit_bias,
    "sampling_seed": _int("i64"),
    "custom_params": None,  # any JSON value
    "beam_width": _int("i64"),
    "watermark": None,
    "choice": None,
}

_TOP_LEVEL: Final[dict[str, Decoder]] = {
    "rid": _STRING_OR_LIST,
    "text": _STRING_OR_LIST,
    "input_ids": _token_ids_or_list,
    "stream": _bool(),
    "sampling_params": _sampling_params_or_list,
    "return_logprob": _one_or_list(_bool("a value or an array of values for BoolOrList"),
                                   _bool()),
    "logprob_start_len": _one_or_list(_int("a value or an array of values for Int64OrList"),
                                      _int("i64")),
    "top_logprobs_num": _one_or_list(_int("a value or an array of values for Int64OrList"),
                                     _int("i64")),
    "token_ids_logprob": _token_ids_or_list,
    "return_hidden_states": _one_or_list(_bool("a value or an array of values for BoolOrList"),
                                         _bool()),
    "return_text_in_logprobs": _bool(),
    "routed_dp_rank": _int("i64"),
    "disagg_prefill_dp_rank": _int("i64"),
}
