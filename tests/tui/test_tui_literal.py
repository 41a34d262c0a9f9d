"""The ``literal`` constructors show escape sequences as text and keep lines and tabs; a Rich
table printed through ``literal.Literal`` shows its cells' escapes. That outside text reaches
the dashboard and the verbs only through them is a rule of ``tests/test_source_rules.py``.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from eagle_tui.tui.render import literal

HOSTILE = "a\x1b]0;PWNED\x07b\x9bc\x1b[?1l"


def test_literal_constructors_show_escapes_and_keep_lines() -> None:
    for made in (literal.content(HOSTILE).plain, literal.rich_text(HOSTILE).plain,
                 literal.assemble(HOSTILE, (HOSTILE, "bold")).plain, literal.shown(HOSTILE),
                 literal.styled(HOSTILE, "bold").plain, literal.lines([HOSTILE]).plain):
        assert "\x1b" not in made and "\x9b" not in made and "␛]0;PWNED" in made
    assert literal.content("keep\nnewlines\tand tabs").plain == "keep\nnewlines\tand tabs"


def test_a_rich_table_printed_through_literal_shows_escapes() -> None:
    table = Table(title=HOSTILE)
    table.add_column(HOSTILE)
    table.add_row(HOSTILE, Text(HOSTILE))
    console = Console(width=100, force_terminal=True, color_system="truecolor", highlight=False)
    with console.capture() as captured:
        console.print(literal.Literal(table))
        console.print(literal.Literal(f"plain {HOSTILE}"))
    out = captured.get()
    assert "\x1b]0;" not in out and "\x9b" not in out and "\x1b[?1l" not in out
    assert out.count("␛]0;PWNED") == 5
    assert "\x1b[" in out  # Rich's own colours still pass
