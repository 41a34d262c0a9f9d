"""Layer 1 of ``/generate`` validation: what FastAPI/pydantic would refuse.

``GenerateReqInput`` is a dataclass validated in pydantic's lax mode: numeric
strings and whole floats pass as ints, ``"yes"`` passes as a bool, but a number
is never a string. Only the top-level fields a client is likely to get wrong are
checked; the message imitates FastAPI's ``RequestValidationError`` text
(``N validation errors:`` + one dict per error, then the errors list again,
which is how SGLang's handler joins them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from eagle_tui.core.sim.validation.rejections import BodyRejected

Check = Callable[[Any], dict[str, Any] | None]  # None: valid; else {"type", "msg", ["at"]}

_ENDPOINT: Final = (
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py", '
    "line 1071, in generate_request\n    POST /generate"
)
_TRUE: Final = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE: Final = frozenset({"false", "f", "no", "n", "off", "0"})


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON object in ``raw``; raises BodyRejected like FastAPI would."""
    if not raw.strip():
        raise _rejected([_error("missing", ("body",), "Field required", None)])
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        pos = e.pos if isinstance(e, json.JSONDecodeError) else e.start
        reason = e.msg if isinstance(e, json.JSONDecodeError) else e.reason
        raise _rejected([_error("json_invalid", ("body", pos), "JSON decode error", {},
                                {"error": reason})]) from e
    if not isinstance(data, dict):
        raise _rejected([_error(
            "dataclass_type", ("body",),
            "Input should be a dictionary or an instance of GenerateReqInput", data,
            {"class_name": "GenerateReqInput"},
        )])
    errors = [e for name, arms in _FIELDS.items() if name in data
              for e in _check_field(name, data[name], arms)]
    if errors:
        raise _rejected(errors)
    return data


def _check_field(name: str, value: Any,
                 arms: tuple[tuple[str, Check], ...]) -> list[dict[str, Any]]:
    if value is None and name != "stream":
        return []  # every checked field but stream is Optional
    failures = []
    for arm_name, check in arms:
        problem = check(value)
        if problem is None:
            return []
        loc = ("body", name, arm_name) if len(arms) > 1 else ("body", name)
        at = problem.get("at", ())  # list indexes down to the offending element
        failures.append(_error(problem["type"], loc + at, problem["msg"],
                               problem.get("input", value)))
    return failures


def _error(kind: str, loc: tuple[Any, ...], msg: str, value: Any,
           ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    error = {"type": kind, "loc": loc, "msg": msg, "input": value}
    if ctx is not None:
        error["ctx"] = ctx
    return error


def _rejected(errors: list[dict[str, Any]]) -> BodyRejected:
    plural = "s" if len(errors) != 1 else ""
    lines = "".join(f"  {error}\n" for error in errors)
    return BodyRejected(f"{len(errors)} validation error{plural}:\n{lines}{_ENDPOINT} {errors}")


def _is_str(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        return None
    return {"type": "string_type", "msg": "Input should be a valid string"}


def _is_int(value: Any) -> dict[str, Any] | None:
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        if value.is_integer():
            return None
        return {"type": "int_from_float",
                "msg": "Input should be a valid integer, got a number with a fractional part"}
    if isinstance(value, str):
        try:
            int(value.strip())
        except ValueError:
            return {"type": "int_parsing",
                    "msg": "Input should be a valid integer, unable to parse string as an integer"}
        return None
    return {"type": "int_type", "msg": "Input should be a valid integer"}


def _is_bool(value: Any) -> dict[str, Any] | None:
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return None
    if isinstance(value, str):
        if value.lower() in _TRUE | _FALSE:
            return None
        return {"type": "bool_parsing",
                "msg": "Input should be a valid boolean, unable to interpret input"}
    return {"type": "bool_type", "msg": "Input should be a valid boolean"}


def _is_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return None
    return {"type": "dict_type", "msg": "Input should be a valid dictionary"}


def _list_of(item: Check) -> Check:
    def check(value: Any) -> dict[str, Any] | None:
        if not isinstance(value, list):
            return {"type": "list_type", "msg": "Input should be a valid list"}
        for index, element in enumerate(value):
            problem = item(element)
            if problem is not None:
                return {**problem, "at": (index, *problem.get("at", ())),
                        "input": problem.get("input", element)}
        return None

    return check


_FIELDS: Final[dict[str, tuple[tuple[str, Check], ...]]] = {
    "text": (("list[str]", _list_of(_is_str)), ("str", _is_str)),
    "input_ids": (
        ("list[list[int]]", _list_of(_list_of(_is_int))), ("list[int]", _list_of(_is_int))
    ),
    "sampling_params": (("list[dict[any,any]]", _list_of(_is_dict)), ("dict[any,any]", _is_dict)),
    "rid": (("list[str]", _list_of(_is_str)), ("str", _is_str)),
    "stream": (("bool", _is_bool),),
    "return_logprob": (("list[bool]", _list_of(_is_bool)), ("bool", _is_bool)),
    "logprob_start_len": (("list[int]", _list_of(_is_int)), ("int", _is_int)),
    "top_logprobs_num": (("list[int]", _list_of(_is_int)), ("int", _is_int)),
    "return_text_in_logprobs": (("bool", _is_bool),),
}
