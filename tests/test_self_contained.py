"""The repository stands on its own: nothing a user reads or runs points outside it.

Someone who clones the project has no ``../shared`` folder beside it and no ``/work``
machine. So the README, docs/, the code, the tests, the scripts and the build files must
not send them there. Each hit is reported as ``file:line``. Named documents that lived
outside the repository (the design notes, the protocol and tokenizer references) may be
mentioned only once docs/ has a file of that name. Every relative link in the README and
docs/ must lead to a file that exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()

# Whole trees scanned (every text file in them), plus single files and the docs' markdown.
TREES = ("core", "tui", "themes", "tests", "scripts", ".ci", "examples")
FILES = ("README.md", "pyproject.toml")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

Rule = tuple[str, re.Pattern[str]]  # (what to call a hit, the pattern)

OUTSIDE: tuple[Rule, ...] = (
    ("a path into ../shared", re.compile(r"\.\./shared\b")),
    ("the shared tools folder", re.compile(r"\bshared/tools\b")),
    ("the shared reference folder", re.compile(r"\bshared/reference\b")),
    ("an absolute /work/ path", re.compile(r"(?<![\w.:/~-])/work/")),
)
ABSOLUTE_WORK = OUTSIDE[-1][0]
RECORDING_SUFFIXES = {".log", ".txt", ".json", ".jsonl"}
# Documents that exist only outside the repository, unless docs/ gets its own copy.
OUTSIDE_DOCS = ("DESIGN.md", "sglang-protocol.md", "kimi-k2.md", "peers-capture.md",
                "peers-tui.md")

LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|#|//)")


def scanned_files() -> Iterator[Path]:
    """Every text file the rules apply to (this test excluded)."""
    for name in FILES:
        yield ROOT / name
    yield from sorted((ROOT / "docs").rglob("*.md"))
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if path.is_file() and not parts & SKIP_DIRS and path.resolve() != THIS:
                yield path


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file (images, parquet)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def forbidden_docs(docs_dir: Path) -> list[Rule]:
    """Rules for the outside documents that docs/ has no file of the same name for."""
    return [(f"{name} (not in docs/)", re.compile(rf"(?<![\w-]){re.escape(name)}"))
            for name in OUTSIDE_DOCS if not (docs_dir / name).exists()]


def outside_references(text: str, docs: list[Rule]) -> list[tuple[int, str]]:
    """(line number, what) for every reference outside the repository in ``text``."""
    # A pattern that opens with a look-behind or \b scans at ~150 ns a character; the plain
    # substring each match must contain is found ~100x faster, so it is looked for first.
    rules = [(what, pattern, needle(pattern)) for what, pattern in (*OUTSIDE, *docs)]
    rules = [rule for rule in rules if rule[2] in text]
    return [(number, what)
            for number, line in enumerate(text.splitlines(), start=1)
            for what, pattern, literal in rules if literal in line and pattern.search(line)]


def needle(pattern: re.Pattern[str]) -> str:
    """The literal text every match of a rule contains: its pattern without the look-behind
    and word boundaries, unescaped (a rule with any other syntax fails here, loudly)."""
    core = re.sub(r"\(\?<!\[[^\]]*\]\)|\\b", "", pattern.pattern).replace("\\", "")
    assert re.fullmatch(r"[\w./-]+", core), f"no plain text to look for in {pattern.pattern!r}"
    return core


def relative_links(markdown: str) -> list[tuple[int, str]]:
    """(line number, target) of each relative link outside code, fragment removed."""
    # Blank out code so its brackets are not links, keeping line numbers.
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    prose = INLINE_CODE.sub(blank, FENCE.sub(blank, markdown))
    links = []
    for pattern in (LINK, REFERENCE_LINK):
        for match in pattern.finditer(prose):
            target = match.group(1)
            if EXTERNAL.match(target):
                continue
            line = prose.count("\n", 0, match.start()) + 1
            links.append((line, target.split("#", 1)[0]))
    return sorted(links)


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# -- the rules on the repository ----------------------------------------------------------


def test_nothing_points_outside_the_repository() -> None:
    docs = forbidden_docs(ROOT / "docs")
    problems = []
    count = 0
    for path in scanned_files():
        text = read_text(path)
        if text is None:
            continue
        count += 1
        rel = path.relative_to(ROOT)
        found = outside_references(text, docs)
        if rel.parts[:2] == ("tests", "fixtures") and rel.suffix in RECORDING_SUFFIXES:
            # A recorded log keeps the paths of the machine it was recorded on: data, not a
            # reference this repository depends on.
            found = [(line, what) for line, what in found if what != ABSOLUTE_WORK]
        problems += [f"{rel}:{line}: {what}" for line, what in found]
    assert count > 100, f"scanned only {count} files; is the repository layout different?"
    assert not problems, "references outside the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize("markdown", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(markdown: Path) -> None:
    broken = [
        f"{markdown.relative_to(ROOT)}:{line}: {target}"
        for line, target in relative_links(markdown.read_text(encoding="utf-8"))
        if target and not (markdown.parent / target).exists()
    ]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def test_the_docs_the_readme_relies_on_exist() -> None:
    for name in ("shard-format.md", "validation-flags.md", "real-sglang.md"):
        assert (ROOT / "docs" / name).is_file(), name
    assert (ROOT / "scripts" / "realsglang" / "realsglang.sh").is_file()


# -- the detectors themselves -------------------------------------------------------------


def test_detector_catches_each_kind(tmp_path: Path) -> None:
    text = "\n".join([
        "see ../shared/DESIGN.md for the schema",
        "run shared/tools/realsrv/realsrv.sh",
        "facts in shared/reference/kimi-k2.md",
        "MODEL = '/work/realsrv/model'",
        "the plan in DESIGN.md",
        "fine: tests/fixtures/realsrv, https://example.com/work/x, ~/work/x, docs/x.md",
    ])
    found = outside_references(text, forbidden_docs(tmp_path))
    assert {line for line, _ in found} == {1, 2, 3, 4, 5}
    assert (5, "DESIGN.md (not in docs/)") in found


def test_a_docs_copy_makes_the_name_fine(tmp_path: Path) -> None:
    (tmp_path / "DESIGN.md").write_text("# design\n")
    assert outside_references("the plan in DESIGN.md", forbidden_docs(tmp_path)) == []


def test_links_outside_code_only() -> None:
    markdown = "\n".join([
        "[a](docs/a.md#part) and ![img](pics/b.png \"title\")",
        "`[not](a-link.md)` and [web](https://example.com) and [here](#anchor)",
        "```",
        "[also not](inside-a-fence.md)",
        "```",
        "[ref]: ../scripts/x.sh",
    ])
    assert relative_links(markdown) == [(1, "docs/a.md"), (1, "pics/b.png"),
                                        (6, "../scripts/x.sh")]
