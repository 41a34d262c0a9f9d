"""Every ``eagle-tui`` verb, each a thin front end (arguments, printing, exit codes) over a
library call in ``eagle_tui.core`` (or, for ``demo`` and the dashboard, the Textual app).

``main`` routes; a verb's module is imported only when that verb runs, so ``eagle-tui
sim`` never pays for Textual or transformers. One module per verb, named after it; helpers
shared by the batch verbs live in ``batch_verbs`` and ``batch_table``.
"""

from __future__ import annotations

from eagle_tui.tui.cli.main import main

__all__ = ["main"]
