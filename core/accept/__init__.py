"""Measuring a drafter's acceptance on SGLang (docs/acceptance.md): pure and typed.

- ``requests``: one answer's acceptance from its ``meta_info``; per-position acceptance;
- ``summary``: a replay's figures, overall and per category (SpecForge's Σcompletion/Σverify,
  the mean of per-request figures, degenerate outputs);
- ``ab``: the difference between two servers with a paired bootstrap interval;
- ``config``: the speculative config and the lifetime figure of ``/server_info``;
- ``window`` / ``decodelog``: live windowed figures from ``/metrics`` counters or the decode
  log; ``figures`` labels each with its source and window; ``live`` picks the best;
- ``alarms``: accept length stuck at 1.00, a fall against a stored result;
- ``stored``: the stored-result format (JSON Lines of msgspec Structs) and comparison;
- ``heldout``: a batch's held-out split, decided by sample id.

Nothing here does I/O beyond the stored-results file: callers fetch ``/server_info``,
``/metrics``, log lines and ``/generate`` answers and pass them in.
"""
