"""Server health: start-up phases from log + process + ``/health``, expected windows from
history, hang and crash diagnosis, and the headless ``eagle-tui watch`` verb.

Data flow: ``watcher.Watcher`` reads a ``core.serverlog`` follower, a ``core.proc`` probe
and a ``poller.HealthPoller`` each tick and hands the readings to ``state.WatchState``,
which folds them (``logtrack``), decides the phase (``phasing``), raises flags with
evidence (``flags``), judges (``verdict``) and returns an immutable
``snapshot.HealthSnapshot``. Expectations come from ``history`` keyed by ``signature``;
limits from ``settings``. ``assemble`` builds a watcher from user options, ``changes``
turns snapshot pairs into one-line events, ``cli`` is ``eagle-tui watch``.

This package imports nothing itself, so loading the CLI verb stays cheap.
"""
