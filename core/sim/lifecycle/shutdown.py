"""Signals while serving: SIGTERM drains like SGLang, a second signal ends it at once.

On the first SIGTERM SGLang logs ``SIGTERM received. … Draining requests and
shutting down...``, answers ``/health`` with 503, keeps serving (``/generate`` is
not gated), and every 5 s logs ``Gracefully exiting... Remaining number of
requests N`` until nothing is in flight; then it exits. The 5 s follow
``--time-scale``. SIGINT, or a second SIGTERM, ends the process immediately.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Final

from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.log.death import exit_now

DRAIN_POLL_SECONDS: Final = 5.0
MIN_DRAIN_POLL: Final = 0.05  # at --time-scale 0: still poll, but do not spin
_FRAME: Final = ("<frame at 0x7f3c2a41d240, file '/usr/lib/python3.12/selectors.py', line 468, "
                 "code select>")


def install_signal_handlers(ctx: SimContext) -> None:
    """Take over SIGTERM and SIGINT for the serving phase."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, _on_sigterm, ctx)
    loop.add_signal_handler(signal.SIGINT, die_by_signal, signal.SIGINT)


def die_by_signal(signum: int) -> None:
    """End the process the way an unhandled ``signum`` would."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_sigterm(ctx: SimContext) -> None:
    if ctx.state.gracefully_exit:
        die_by_signal(signal.SIGTERM)
        return
    ctx.state.gracefully_exit = True
    ctx.log.main(f"SIGTERM received. signum={int(signal.SIGTERM)} frame={_FRAME}. "
                 "Draining requests and shutting down...")
    ctx.spawn(_drain(ctx))


async def _drain(ctx: SimContext) -> None:
    poll = max(ctx.config.scaled(DRAIN_POLL_SECONDS), MIN_DRAIN_POLL)
    while True:
        await asyncio.sleep(poll)
        remaining = list(ctx.state.in_flight)
        ctx.log.main(f"Gracefully exiting... Remaining number of requests {len(remaining)}. "
                     f"Remaining requests remaining_rids={remaining}.")
        if not remaining:
            exit_now(0)
