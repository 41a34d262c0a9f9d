"""Declared tools, read from a ``tool_declare`` block, and the calls the fake model makes.

Kimi's templates declare tools either as JSON (OpenAI ``tools`` list) or as a
TypeScript-style namespace (``type get_weather = (_: { city: string }) => any;``).
Both are read leniently: a tool name and its parameter names are all the sim needs.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Final

FALLBACK_TOOL = "get_weather"
ARGUMENT_WORDS: Final = (  # argument values of the calls
    "Paris", "Berlin", "Tokyo", "latest news", "weather", "report", "42", "python", "summary",
    "today",
)
_TS_TYPE = re.compile(r"type\s+([A-Za-z_][\w.]*)\s*=\s*\(")
_TS_PARAM = re.compile(r"^\s*([A-Za-z_]\w*)\??\s*:", re.MULTILINE)
_JSON_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


@dataclass(frozen=True)
class DeclaredTool:
    """A tool the prompt declares: its name and parameter names."""

    name: str
    params: tuple[str, ...]


def declared_tools(text: str) -> list[DeclaredTool]:
    """The tools in a ``tool_declare`` block; a generic one if none can be read."""
    tools = _from_json(text) or _from_typescript(text)
    if not tools:
        names = _JSON_NAME.findall(text)
        tools = [DeclaredTool(name, ()) for name in names]
    return tools or [DeclaredTool(FALLBACK_TOOL, ("city",))]


def call_arguments(tool: DeclaredTool, rng: random.Random) -> str:
    """A JSON arguments object for ``tool``, as Kimi writes it (``{"city": "Paris"}``)."""
    params = tool.params[:2] or ("query",)
    return json.dumps({name: rng.choice(ARGUMENT_WORDS) for name in params})


def canonical_arguments(tool: DeclaredTool) -> str:
    """The arguments of the canonical call: every parameter (at most two, as for random
    calls) set to the first argument word, e.g. ``{"city": "Paris"}``."""
    params = tool.params[:2] or ("query",)
    return json.dumps(dict.fromkeys(params, ARGUMENT_WORDS[0]))


def _from_json(text: str) -> list[DeclaredTool]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data if isinstance(data, list) else [data]
    return [tool for item in items if (tool := _json_tool(item)) is not None]


def _json_tool(item: Any) -> DeclaredTool | None:
    if not isinstance(item, dict):
        return None
    function = item.get("function", item)
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    params = tuple(properties) if isinstance(properties, dict) else ()
    return DeclaredTool(function["name"], params)


def _from_typescript(text: str) -> list[DeclaredTool]:
    matches = list(_TS_TYPE.finditer(text))
    tools = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end]
        params = tuple(p for p in _TS_PARAM.findall(body) if p != "_")
        tools.append(DeclaredTool(match.group(1), params))
    return tools
