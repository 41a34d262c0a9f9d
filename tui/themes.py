"""Theme files: ``themes/*.toml`` (shipped) and ``<config dir>/themes/*.toml`` (the user's).

A theme file holds the fields of ``textual.theme.Theme`` (``name``, ``primary``, ``dark``…)
and an optional ``[variables]`` table. A file that cannot be read or parsed is skipped and
reported, never fatal: the app still starts with the themes that did load.
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from eagle_tui.core.fsio import KIB, read_small
from eagle_tui.core.paths import config_dir

log = logging.getLogger(__name__)

DEFAULT_THEME = "eagle-dark"
MAX_THEME_BYTES = 256 * KIB  # a theme is a few dozen colours
SHIPPED_THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"

_COLOUR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


@dataclass(frozen=True)
class ThemeLoad:
    """What loading the theme directories produced: themes, and files that failed (why)."""

    themes: tuple[Theme, ...]
    problems: tuple[str, ...]


def theme_dirs() -> tuple[Path, ...]:
    """Directories searched for theme files, shipped first (a user file of the same name wins)."""
    return (SHIPPED_THEMES_DIR, config_dir() / "themes")


def load_themes(directories: Iterable[Path] | None = None) -> ThemeLoad:
    """Every ``*.toml`` theme in ``directories`` (default :func:`theme_dirs`)."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for path in _theme_files(directories if directories is not None else theme_dirs()):
        try:
            theme = theme_from_file(path)
        except (OSError, ValueError, TypeError) as exc:
            problems.append(f"theme file {path} skipped: {exc}")
            log.warning("theme file %s skipped: %s", path, exc)
            continue
        themes[theme.name] = theme
    return ThemeLoad(tuple(themes.values()), tuple(problems))


def _theme_files(directories: Iterable[Path]) -> Iterator[Path]:
    for directory in directories:
        if directory.is_dir():
            yield from sorted(directory.glob("*.toml"))


def theme_from_file(path: Path) -> Theme:
    """The theme in ``path``; ValueError naming the file and field when it is malformed."""
    data = tomllib.loads(read_small(path, MAX_THEME_BYTES, "theme file").decode("utf-8"))
    return theme_from_mapping(data, default_name=path.stem)


def theme_from_mapping(data: dict[str, Any], *, default_name: str) -> Theme:
    """A ``Theme`` from parsed TOML; unknown keys are rejected so typos are seen."""
    known = {"name", "dark", "variables", "luminosity_spread", "text_alpha", *_COLOUR_FIELDS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown keys {', '.join(unknown)}")
    if not isinstance(data.get("primary"), str):
        raise ValueError("'primary' (a colour such as \"#5fafff\") is required")
    colours: dict[str, Any] = {
        key: _colour(key, data[key]) for key in _COLOUR_FIELDS if key in data
    }
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ValueError("[variables] must be a table of name = colour")
    return Theme(
        name=str(data.get("name", default_name)),
        dark=bool(data.get("dark", True)),
        luminosity_spread=float(data.get("luminosity_spread", 0.15)),
        text_alpha=float(data.get("text_alpha", 0.95)),
        variables={str(k): str(v) for k, v in variables.items()},
        **colours,
    )


def _colour(key: str, value: object) -> str:
    """``value`` as a colour string, or ValueError naming ``key``."""
    try:
        Color.parse(str(value))
    except ColorParseError as exc:
        raise ValueError(f"{key} = {value!r} is not a colour ({exc})") from None
    return str(value)
