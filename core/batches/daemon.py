"""``python -m eagle_tui.core.batches.daemon WORKER-ARGS``: fork away, then run the batch worker.

The launcher starts this in a new session (``start_new_session``) and reaps it at once:
it forks before importing anything heavy (no threads exist yet) and exits, so the worker
is nobody's child. Init adopts it; the launcher never has to reap it (a long-lived TUI
would otherwise collect zombies), and not being its session's leader it can never regain a
controlling terminal, so closing the terminal or dropping SSH does not reach it.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Fork; the parent exits 0 at once, the child runs the worker."""
    if os.fork() > 0:
        os._exit(0)
    from eagle_tui.core.batches.worker import main as worker_main

    raise SystemExit(worker_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
