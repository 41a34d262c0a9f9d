"""``python -m core.sim``: run the simulated SGLang server (flags: ``--help``)."""

from eagle_tui.core.sim.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
