"""``eagle-tui sim``: the simulated SGLang server.

The sim is a stand-alone program (``python -m eagle_tui.core.sim``, a stand-in for SGLang's
own ``launch_server``), so its argument parser lives with it; this verb only routes there.
"""

from __future__ import annotations

from eagle_tui.core.sim.args import add_arguments, run

__all__ = ["add_arguments", "run"]
