"""``python -m eagle_tui.core.sim``: run the simulated SGLang server (flags: ``--help``)."""

from eagle_tui.core.sim.args import main

if __name__ == "__main__":
    raise SystemExit(main())
