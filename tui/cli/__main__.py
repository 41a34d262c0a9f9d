"""``python -m eagle_tui.tui.cli`` is ``eagle-tui``."""

from __future__ import annotations

from eagle_tui.tui.cli.main import main

raise SystemExit(main())
