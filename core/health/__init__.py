"""Server health: start-up phases from log + process + ``/health``, expected windows from
history, hang and crash diagnosis, and the headless ``eagle-tui watch`` verb.

Data flow: ``watcher.Watcher`` reads a ``core.serverlog`` follower, a ``core.proc`` probe
and a ``poller.HealthPoller`` each tick (one ``observed.Observation``) and hands the readings
to ``state.WatchState``, which folds them (``observed``: the latest of each source;
``logtrack``: steps from ``steps``, ranks from ``ranks``, failures in ``crashlog``, dates from
``logclock``; ``timeline``: the incarnation and its times; ``deployment``: signature, ranks
and laggards), decides the phase (``phasing``, over a ``context.TickContext``), raises flags
with evidence and next steps (``flags``, ``stall``, ``nextstep``), judges (``verdict``, with
``evidence``) and builds an immutable ``snapshot.HealthSnapshot`` with a pure function
(``snapshot_build``). Expectations come from ``history`` keyed by ``signature`` and are read
and recorded by ``recorder``; limits from ``settings`` and ``steps``. ``assemble`` builds a
watcher from user options, ``changes`` turns snapshot pairs into one-line events, ``follow``
runs watchers and yields those events (``eagle-tui watch`` prints them).
With the server's PID the watcher also samples its process tree (``core.proc``) and takes
the ranks' stacks on a stall; ``cause`` reads the sample (hung, waiting for peers, blocked
on I/O, stopped, busy) for the flags. ``timings`` reads SGLang's own start-up figures for
history; ``diagnose`` is the one-shot evidence bundle of ``eagle-tui diagnose``.
Beside the watch, ``acceptance`` reads a speculating server's live accept length
(``status``, the Server view; docs/acceptance.md).
docs/startup-diagnosis.md explains the judgement and where its limits come from.

This package imports nothing itself, so loading the CLI verb stays cheap.
"""
