"""Turning one decoded prompt record into the messages and tools that get rendered.

Accepted shapes (one JSON object per record):

- OpenAI style: ``{"id"?, "messages": [{"role", "content", ...}], "tools"?: [...]}``;
- ShareGPT style: ``{"id"?, "conversations": [{"from", "value"}], "system"?, "tools"?}``.

``messages`` / ``conversations`` / ``tools`` may also be JSON *strings* holding those lists
(parquet files often store them that way). Keys whose value is null are dropped from each
message (parquet structs carry every field of every row), except ``content``.

Before anything else a record is walked once: nesting deeper than :data:`MAX_DEPTH` and strings
that are not valid Unicode (lone surrogates from ``\\udc80`` escapes, which tokenizers and
parquet refuse) are rejected with the field they are in.

Trailing assistant turns are dropped: capture regenerates the last assistant turn. A record
with no user turn left is refused. The whole conversation, trailing assistant turns included,
stays in ``full_messages`` for multi-turn capture (``--turns all``), which regenerates every
assistant turn. Anything else wrong raises :class:`RecordError` with a
reason that names the offending field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eagle_tui.core.sample_ids import content_sample_id, id_problem

ROLES = ("system", "user", "assistant", "tool")

SHAREGPT_ROLES: Mapping[str, str] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "function_response": "tool",
    "observation": "tool",
}
"""ShareGPT ``from`` values and the role each becomes (``function_call`` is handled apart)."""

MAX_DEPTH = 100
"""Deepest nesting of lists and objects a record may have (tool schemas use about 10)."""

Message = dict[str, Any]
Tools = tuple[dict[str, Any], ...]


class RecordError(ValueError):
    """A record that cannot be used; ``reason`` says which field is wrong and how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NormalizedRecord:
    """What a record becomes: its sample id, the messages to render and the tools.

    ``full_messages`` is the whole conversation when it ended with assistant turns (which
    ``messages`` drops), else empty: the same as ``messages``.
    """

    sample_id: str
    messages: tuple[Message, ...]
    tools: Tools | None
    full_messages: tuple[Message, ...] = ()
    category: str | None = None  # the record's ``category`` (e.g. its benchmark), if a string


def normalize_record(record: object) -> NormalizedRecord:
    """Check and normalize one decoded record; raises RecordError with a precise reason."""
    if not isinstance(record, dict):
        raise RecordError(f"record is a JSON {_json_type(record)}, not an object")
    for key, value in record.items():
        _check_structure(key, value)
    full = _messages_of(record)
    tools = _tools_of(record.get("tools"))
    messages = _drop_trailing_assistant(full)
    if not any(m["role"] == "user" for m in messages):
        raise RecordError("no user turn (after dropping trailing assistant turns)")
    sample_id = _explicit_id(record.get("id"))
    if sample_id is None:
        sample_id = content_sample_id(messages, tools)
    whole = tuple(full) if len(full) != len(messages) else ()
    category = record.get("category")
    return NormalizedRecord(sample_id, tuple(messages), tools, whole,
                            category if isinstance(category, str) and category else None)


def _loads(text: str, field: str) -> Any:
    """A JSON string field decoded and walked like the record itself."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise RecordError(f"'{field}' is a string of JSON nested too deeply") from None
    except ValueError as e:
        raise RecordError(f"'{field}' is a string that is not valid JSON: {e}") from e
    _check_structure(field, value)
    return value


def _check_structure(field: object, value: object) -> None:
    """Refuse nesting deeper than MAX_DEPTH and strings that are not valid Unicode.

    Iterative, so a hostile record cannot exhaust the stack here (or later, in the JSON
    encoder, the chat template or the tokenizer, which all recurse).
    """
    stack: list[tuple[object, int]] = [(field, 1), (value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                _check_unicode(field, item)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise RecordError(f"'{field}' is nested more than {MAX_DEPTH} levels deep")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _check_unicode(field: object, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start].encode("unicode_escape").decode("ascii")
        raise RecordError(
            f"'{str(field).encode('utf-8', 'backslashreplace').decode()}' holds a lone "
            f"surrogate ({bad}) at character {e.start} of a string: not valid Unicode "
            "(the file wrote half of a character as a \\u escape)") from None


def _messages_of(record: dict[str, Any]) -> list[Message]:
    """The record's messages, from ``messages`` (preferred) or ``conversations``."""
    if record.get("messages") is not None:
        raw = _decoded_list(record["messages"], "messages")
        return [_openai_message(m, i) for i, m in enumerate(raw)]
    if record.get("conversations") is not None:
        raw = _decoded_list(record["conversations"], "conversations")
        converted = [_sharegpt_turn(t, i) for i, t in enumerate(raw)]
        return _with_system(converted, record.get("system"))
    raise RecordError("no 'messages' (OpenAI style) or 'conversations' (ShareGPT style) field")


def _decoded_list(value: object, field: str) -> list[Any]:
    """``value`` as a non-empty list, decoding a JSON string first."""
    if isinstance(value, str):
        value = _loads(value, field)
    if not isinstance(value, list):
        raise RecordError(f"'{field}' must be a list, got a JSON {_json_type(value)}")
    if not value:
        raise RecordError(f"'{field}' is empty")
    return value


def _openai_message(raw: object, index: int) -> Message:
    """One OpenAI-style message, checked; null-valued keys other than content dropped."""
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise RecordError(f"{where} is a JSON {_json_type(raw)}, not an object")
    message = {k: v for k, v in raw.items() if v is not None or k == "content"}
    role = message.get("role")
    if role not in ROLES:
        raise RecordError(f"{where}.role is {role!r}; use one of {', '.join(ROLES)}")
    _check_content(message, where)
    _check_optional(message, where, "tool_calls", list)
    for key in ("reasoning_content", "tool_call_id", "name"):
        _check_optional(message, where, key, str)
    return message


def _check_content(message: Message, where: str) -> None:
    """Content is text or a list of parts; only an assistant turn may leave it out."""
    content = message.get("content")
    if content is None:
        if message["role"] != "assistant":
            raise RecordError(f"{where} ({message['role']}) has no content")
        return
    if isinstance(content, str):
        return
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return
    raise RecordError(
        f"{where}.content must be a string or a list of content parts, "
        f"got a JSON {_json_type(content)}"
    )


def _check_optional(message: Message, where: str, key: str, kind: type) -> None:
    """A present optional key has the right JSON type."""
    if key in message and not isinstance(message[key], kind):
        expected = "a list" if kind is list else "a string"
        raise RecordError(
            f"{where}.{key} must be {expected}, got a JSON {_json_type(message[key])}"
        )


def _sharegpt_turn(raw: object, index: int) -> Message:
    """One ShareGPT turn (``from``/``value``) as an OpenAI-style message."""
    where = f"conversations[{index}]"
    if not isinstance(raw, dict):
        raise RecordError(f"{where} is a JSON {_json_type(raw)}, not an object")
    speaker, value = raw.get("from"), raw.get("value")
    if not isinstance(value, str):
        raise RecordError(f"{where}.value must be a string, got a JSON {_json_type(value)}")
    if speaker == "function_call":
        return _sharegpt_function_call(value, where)
    role = SHAREGPT_ROLES.get(speaker) if isinstance(speaker, str) else None
    if role is None:
        known = ", ".join([*SHAREGPT_ROLES, "function_call"])
        raise RecordError(f"{where}.from is {speaker!r}; use one of {known}")
    return {"role": role, "content": value}


def _sharegpt_function_call(value: str, where: str) -> Message:
    """A ShareGPT ``function_call`` turn: an assistant message with one tool call."""
    try:
        call = _loads(value, where)
    except RecordError as e:
        raise RecordError(f"{where} is a function_call whose value is not JSON we can use "
                          f"({e.reason})") from e
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise RecordError(f"{where} is a function_call without a string 'name'")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    function = {"name": call["name"], "arguments": arguments}
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": function}
    ]}


def _with_system(messages: list[Message], system: object) -> list[Message]:
    """Prepend a top-level ShareGPT ``system`` prompt unless a system turn exists."""
    if system is None or system == "" or any(m["role"] == "system" for m in messages):
        return messages
    if not isinstance(system, str):
        raise RecordError(f"'system' must be a string, got a JSON {_json_type(system)}")
    return [{"role": "system", "content": system}, *messages]


def _tools_of(value: object) -> Tools | None:
    """The tool declarations: a list of objects (or a JSON string of one); [] means none."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = _loads(value, "tools")
    if not isinstance(value, list):
        raise RecordError(f"'tools' must be a list, got a JSON {_json_type(value)}")
    for i, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise RecordError(f"tools[{i}] is a JSON {_json_type(tool)}, not an object")
    return tuple(value) or None


def _drop_trailing_assistant(messages: list[Message]) -> list[Message]:
    """Messages without the assistant turns at the end (the turn we regenerate)."""
    end = len(messages)
    while end and messages[end - 1]["role"] == "assistant":
        end -= 1
    return messages[:end]


def _explicit_id(value: object) -> str | None:
    """The record's own id as a string; None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RecordError(f"'id' must be a string or an integer, got a JSON {_json_type(value)}")
    text = str(value)
    problem = id_problem(text)
    if problem is not None:
        raise RecordError(problem)
    return text


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
