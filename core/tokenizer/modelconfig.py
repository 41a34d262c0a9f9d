"""Reading the model's ``config.json`` for the vocabulary size (no ``transformers`` needed)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import MIB, read_small

MAX_MODEL_CONFIG_BYTES = 16 * MIB
"""Largest ``config.json`` read (real ones are a few KiB)."""

CONFIG_NAME = "config.json"


def read_model_config(directory: Path) -> dict[str, Any] | None:
    """The parsed ``config.json`` in ``directory``, or None when there is none.

    Raises ConfigError when the file exists but is not a JSON object.
    """
    path = directory / CONFIG_NAME
    if not path.exists():  # a FIFO or device named config.json is refused, not skipped
        return None
    try:
        data = json.loads(read_small(path, MAX_MODEL_CONFIG_BYTES, "model config").decode("utf-8"))
    except UnfitFile as e:
        raise ConfigError(f"{e}; fix or remove the file") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read model config {path}: {e}; fix or remove the file") from e
    if not isinstance(data, dict):
        raise ConfigError(f"model config {path} is not a JSON object; fix or remove the file")
    return data


def config_vocab_size(config: dict[str, Any]) -> int | None:
    """``vocab_size`` from a model config, top level or in ``text_config`` (Kimi-K2.5)."""
    for section in (config, config.get("text_config")):
        if isinstance(section, dict):
            size = section.get("vocab_size")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                return size
    return None


def first_vocab_size(directories: Iterable[Path]) -> int | None:
    """The first ``vocab_size`` found in the ``config.json`` of ``directories``, in order."""
    for directory in directories:
        config = read_model_config(directory)
        size = config_vocab_size(config) if config is not None else None
        if size is not None:
            return size
    return None


def model_vocab_size(directory: Path) -> int:
    """``vocab_size`` from the ``config.json`` of a model directory the user named: a
    directory without one is an error, not a silent fall-back (ConfigError)."""
    config = read_model_config(directory)
    if config is None:
        raise ConfigError(f"{directory} has no {CONFIG_NAME}; give the model directory (the "
                          f"one holding {CONFIG_NAME}), or leave --model-dir out to take the "
                          "vocabulary size from the tokenizer directory")
    size = config_vocab_size(config)
    if size is None:
        raise ConfigError(f"{directory / CONFIG_NAME} has no vocab_size (top level or in "
                          "text_config); give the model directory whose config.json has it, "
                          "or leave --model-dir out")
    return size
