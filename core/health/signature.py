"""A server's signature: the settings that decide how long its start-up takes.

Start-ups are only comparable between runs of the same model with the same parallelism,
quantization and speculative setup, so history is kept per signature. The signature is
read from the log's ``server_args`` line when there is a log (the resolved settings), from
the command line otherwise, or given explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# signature field -> (server_args key, command-line flags, default when unset)
_FIELDS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("model", "model_path", ("--model-path", "--model"), "?"),
    ("tp", "tp_size", ("--tp-size", "--tp", "--tensor-parallel-size"), "1"),
    ("dp", "dp_size", ("--dp-size", "--dp", "--data-parallel-size"), "1"),
    ("pp", "pp_size", ("--pp-size", "--pp", "--pipeline-parallel-size"), "1"),
    ("ep", "ep_size", ("--ep-size", "--ep", "--expert-parallel-size"), "1"),
    ("quant", "quantization", ("--quantization",), "none"),
    ("spec", "speculative_algorithm", ("--speculative-algorithm",), "none"),
)


def _normal(value: str | None, default: str) -> str:
    if value is None or value in ("None", "null", ""):
        return default
    return value


def signature_from_server_args(fields: Mapping[str, str]) -> str | None:
    """The signature of a ``server_args`` line's settings; None without a model path."""
    if "model_path" not in fields:
        return None
    return _join({name: _normal(fields.get(key), dflt) for name, key, _, dflt in _FIELDS})


def signature_from_argv(argv: Sequence[str]) -> str | None:
    """The signature of a server command line; None when it names no model."""
    values = _flag_values(argv)
    found = {name: _normal(_first(values, flags), dflt) for name, _, flags, dflt in _FIELDS}
    return None if found["model"] == "?" else _join(found)


def flag_values(argv: Sequence[str]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` pairs of a command line."""
    return _flag_values(argv)


def _flag_values(argv: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for index, arg in enumerate(argv):
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            values[name] = value
        elif arg.startswith("--") and index + 1 < len(argv):
            values[arg] = argv[index + 1]
    return values


def _first(values: Mapping[str, str], flags: tuple[str, ...]) -> str | None:
    return next((values[f] for f in flags if f in values), None)


def _join(found: Mapping[str, str]) -> str:
    return " ".join(f"{name}={found[name]}" for name, *_ in _FIELDS)
