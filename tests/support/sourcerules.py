"""One harness for the rules the project's own source keeps (``tests/test_source_rules.py``).

A rule names the folders it reads, a finder that returns ``(line, what)`` for each place a
source file breaks it, the advice to print, and a sample source that breaks it at known
lines, so each rule is shown able to fail. Files are read and parsed once per test process
(``support.sources.parsed_file``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from support.sources import parsed_file

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Source:
    """One Python file under ``root``, its text and tree read on first use."""

    path: Path
    root: Path = ROOT

    @property
    def name(self) -> str:
        return self.path.relative_to(self.root).as_posix()

    @cached_property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def tree(self) -> Any:
        return parsed_file(self.path)


Finder = Callable[[Source], Iterable[tuple[int, str]]]


def _keep_all(name: str) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    """A rule the source keeps, and a sample that breaks it on ``sample_lines``."""

    name: str  # the test id
    advice: str  # printed above the places that break the rule
    folders: tuple[str, ...]  # relative to the root
    find: Finder
    sample: str  # a source that breaks the rule ...
    sample_lines: tuple[int, ...]  # ... on these lines (once per finding)
    keep: Callable[[str], bool] = _keep_all  # by the file's name relative to the root
    sample_name: str = "sample.py"
    pattern: str = "*.py"  # "*.py" for one folder level, "**/*.py" for the whole tree

    def __repr__(self) -> str:
        return self.name


def sources(rule: Rule, root: Path = ROOT) -> Iterator[Source]:
    """The files ``rule`` reads, in a stable order."""
    for folder in rule.folders:
        for path in sorted((root / folder).glob(rule.pattern)):
            source = Source(path, root)
            if rule.keep(source.name):
                yield source


def violations(rule: Rule, root: Path = ROOT) -> list[str]:
    """``file:line: what`` for every place the files under ``root`` break ``rule``."""
    return [f"{source.name}:{line}: {what}"
            for source in sources(rule, root) for line, what in rule.find(source)]


def sample_violations(rule: Rule, workdir: Path) -> list[int]:
    """The lines on which ``rule`` finds its own sample breaking it."""
    path = workdir / rule.sample_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rule.sample, encoding="utf-8")
    return sorted(line for line, _ in rule.find(Source(path, workdir)))
