"""The checked value of every command-line option: argparse ``type`` functions and the parser
every verb (and the simulated server) is built with.

A bad value is refused while the command line is parsed, as an ``argparse`` error: one line
naming the option (``eagle-tui capture: argument --concurrency: 0 is below 1 …``) and exit
status 2, before anything is created or sent. Never the project's own errors, never a
traceback, and never a value that parses but cannot work later (NaN or infinite seconds, a
port of 99999, a negative count, a FIFO where a file is read, an empty output path).

- ``Whole(low, high)`` and ``Number(low, high)`` are numbers in a closed range (a number is
  always finite; ``above=True`` makes the low end open: "more than 0 seconds");
- ``FileIn``, ``DirIn``, ``DirOut``, ``FileOut`` and ``FileFollowed`` are paths that must be
  of the right kind (a regular file, an existing directory, a directory that may be created,
  a file that may be created in an existing directory, a log that may not exist yet);
- ``Checked(parse)`` adapts a parse function that raises ``ValueError`` or an ``EagleError``.

Each is a small class, so a test can list the options of every verb and know what each one
accepts (``tests/test_cli_option_fuzz.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, NoReturn, TypeVar

from eagle_tui.core.errors import EagleError
from eagle_tui.core.fsio import kind_of

T = TypeVar("T")

MAX_SECONDS = 30 * 24 * 3600.0
"""Longest duration any option takes (30 days): enough for any timeout or limit, and far
below what a timer or ``select`` can hold."""

SHOWN_CHARS = 160
MAX_DIGITS = 40  # more is out of every range (and int() refuses past 4300 digits)


def shown(text: str) -> str:
    """A value quoted for an error line: control characters escaped by ``repr``, and a huge
    value clipped in the middle (a path keeps its file name)."""
    if len(text) > SHOWN_CHARS:
        half = SHOWN_CHARS // 2
        text = f"{text[:half]}…({len(text)} characters)…{text[-half:]}"
    return repr(text)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (no usage block): what is
    wrong, with the option named, and where to look; exit status 2."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


@dataclass(frozen=True)
class Whole:
    """A whole number in ``low..high``."""

    low: int
    high: int
    what: str = ""

    def __call__(self, text: str) -> int:
        digits = text.strip().lstrip("+-")
        if digits.isdigit() and len(digits) > MAX_DIGITS:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is out of range; give a whole number from {self.low} to "
                f"{self.high}{self._for()}")
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not a whole number; give one from {self.low} to "
                f"{self.high}{self._for()}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is out of range; give a whole number from {self.low} to "
                f"{self.high}{self._for()}")
        return value

    def _for(self) -> str:
        return f" ({self.what})" if self.what else ""


@dataclass(frozen=True)
class Number:
    """A finite number in ``low..high`` (``above``: strictly more than ``low``)."""

    low: float
    high: float
    above: bool = False
    what: str = ""

    def __call__(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not a finite number; give one {self.range_text()}")
        too_low = value <= self.low if self.above else value < self.low
        if too_low or value > self.high:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is out of range; give a number {self.range_text()}")
        return value

    def range_text(self) -> str:
        """``from 0 to 2592000 seconds``, ``more than 0, at most 1``."""
        low, high = _plain(self.low), _plain(self.high)
        span = f"more than {low}, at most {high}" if self.above else f"from {low} to {high}"
        return span + (f" {self.what}" if self.what else "")


def _plain(value: float) -> str:
    """``2592000`` rather than ``2.592e+06``; ``0.1`` stays ``0.1``."""
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def seconds(*, zero: bool = False, high: float = MAX_SECONDS) -> Number:
    """A duration: more than 0 seconds (``zero``: 0 allowed) up to ``high``, finite."""
    return Number(0.0, high, above=not zero, what="seconds")


def _nonempty(text: str, what: str) -> None:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"is empty; give {what}")


def _mode(path: Path) -> int | None:
    """``st_mode`` of ``path`` (following symlinks), None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{shown(str(path))}: {e.strerror or e}") from None


def _given(text: str, what: str) -> tuple[Path, int | None]:
    """The path ``text`` names (``~`` expanded) and its ``st_mode``, None when nothing is
    there; ``''`` refused (it would be the current directory)."""
    _nonempty(text, f"the {what}")
    path = Path(text).expanduser()
    return path, _mode(path)


def _existing(text: str, what: str) -> tuple[Path, int]:
    """Like ``_given``, for a path that must exist."""
    path, mode = _given(text, what)
    if mode is None:
        raise argparse.ArgumentTypeError(f"{shown(text)} does not exist; give the {what}")
    return path, mode


@dataclass(frozen=True)
class _PathOfKind:
    """A path argument that, where something is there, must be one of ``kinds`` (``st_mode``
    file types); anything else is refused in one line saying what it is."""

    what: str
    kinds: ClassVar[tuple[int, ...]] = ()
    must_exist: ClassVar[bool] = True
    give: ClassVar[str] = "the"

    def __call__(self, text: str) -> Path:
        path, mode = _existing(text, self.what) if self.must_exist else _given(text, self.what)
        if mode is not None and stat.S_IFMT(mode) not in self.kinds:
            wanted = _KIND_WANTED.get(self.kinds[0], "") if len(self.kinds) == 1 else ""
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is {_kind(mode)}{wanted}; give {self.give} {self.what}")
        return path


_KIND_WANTED = {stat.S_IFREG: ", not a regular file", stat.S_IFDIR: ", not a directory"}


class FileIn(_PathOfKind):
    """An existing regular file to read (never a FIFO, device or directory)."""

    kinds = (stat.S_IFREG,)


class DirIn(_PathOfKind):
    """An existing directory to read."""

    kinds = (stat.S_IFDIR,)


class PathIn(_PathOfKind):
    """An existing directory or regular file to read (a batch, ``shards/`` or one shard)."""

    kinds = (stat.S_IFDIR, stat.S_IFREG)


class DirOut(_PathOfKind):
    """A directory that is written to: it exists or will be created (never ``''``, which
    would be the current directory, nor a file or device)."""

    kinds, must_exist = (stat.S_IFDIR,), False


class FileOut(_PathOfKind):
    """A file that is written (created or replaced) in a directory that exists."""

    kinds, must_exist, give = (stat.S_IFREG,), False, "a file name for the"

    def __call__(self, text: str) -> Path:
        path = super().__call__(text)
        parent = _mode(path.parent)
        if parent is None or not stat.S_ISDIR(parent):
            raise argparse.ArgumentTypeError(
                f"{shown(text)}: its directory {shown(str(path.parent))} does not exist; "
                "create it first or give another path")
        return path


class FileFollowed(_PathOfKind):
    """A log file that is read as it grows: it may not exist yet, but when it does it must be
    a regular file (a FIFO would hang the reader, a device never ends)."""

    kinds, must_exist = (stat.S_IFREG,), False


@dataclass(frozen=True)
class Line:
    """A non-empty line of text without control characters (a name, a host)."""

    what: str

    def __call__(self, text: str) -> str:
        _nonempty(text, self.what)
        if not text.isprintable():
            raise argparse.ArgumentTypeError(
                f"{shown(text)} holds control characters; give {self.what}")
        return text


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A parse function (``Partition.parse``, ``ServerURL.parse``...) as an argparse type:
    its ``ValueError`` or ``EagleError`` becomes argparse's one-line error."""

    parse: Callable[[str], T]

    def __call__(self, text: str) -> T:
        try:
            return self.parse(text)
        except (ValueError, EagleError, RecursionError) as e:
            message = str(e) if not isinstance(e, RecursionError) else "is nested too deeply"
            raise argparse.ArgumentTypeError(message) from None

    @property
    def __name__(self) -> str:
        """What argparse calls the type in its own messages."""
        return getattr(self.parse, "__name__", "value")


def _kind(mode: int) -> str:
    return "a regular file" if stat.S_ISREG(mode) else kind_of(mode)


def fail(prog: str, message: str) -> NoReturn:
    """Exit 2 with one usage line, for a check that needs two options at once."""
    print(f"{prog}: {' '.join(message.split())} (see {prog} --help)", file=sys.stderr)
    raise SystemExit(2)
