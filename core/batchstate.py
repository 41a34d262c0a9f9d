"""The states of a capture batch: one enum for the engine, the worker, the registry and views.

    starting      launched or preparing (tokenizer, resume scan); nothing sent yet
    running       dispatching requests
    paused        no new requests go out; in-flight ones finish
    stopping      draining in-flight requests after a stop
    unresponsive  (derived) a worker holds the directory but its socket does not answer
    done          every row was settled and the worker exited
    stopped       stopped on request; ``resume`` continues it
    failed        the run failed (see its reason); ``resume`` retries it
    interrupted   (derived) the worker died without finishing; ``resume`` continues it
    finished      the engine's own word for ``done`` (``CaptureSummary.state`` and the
                  manifest's ``extra.state``); the control API, registry and views say ``done``

``BatchState`` is a ``StrEnum``: its members compare equal to, hash like and format as
their names, so JSON and text output are unchanged, and a decoder typed with it refuses
any other name.
"""

from __future__ import annotations

from enum import StrEnum


class BatchState(StrEnum):
    """A batch's state (see the module docstring)."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    UNRESPONSIVE = "unresponsive"
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"

    @property
    def public(self) -> BatchState:
        """The state users see: the engine's ``finished`` is ``done``."""
        return BatchState.DONE if self is BatchState.FINISHED else self


LIVE_STATES = frozenset({BatchState.STARTING, BatchState.RUNNING, BatchState.PAUSED,
                         BatchState.STOPPING, BatchState.UNRESPONSIVE})
"""A worker runs (or is about to) for a batch in one of these."""

FINAL_STATES = frozenset({BatchState.DONE, BatchState.STOPPED, BatchState.FAILED})
"""How a worker's run can end (what the registry records and ``end`` reports)."""

RESUMABLE_STATES = frozenset({BatchState.STOPPED, BatchState.FAILED, BatchState.INTERRUPTED})
"""A new worker can continue a batch in one of these."""


def public_state(state: BatchState | str) -> BatchState:
    """The state users see (the engine's ``finished`` is ``done``); ValueError for a name
    that is not a state."""
    return BatchState(state).public


__all__ = ["FINAL_STATES", "LIVE_STATES", "RESUMABLE_STATES", "BatchState", "public_state"]
