"""Capture: prompts in, exact-token training rows out, from one or more SGLang servers.

``engine.CaptureEngine(config).run()`` runs one batch (docs/large-capture.md); the
``capture`` verb (``tui/cli/capture.py``) and the detached worker (``core.batches.worker``)
drive it. Map of the package:

- ``engine``: the engine and its control surface (progress, pause, stop, watch);
  ``control``: the pause gate, stop flag and watch budget its parts share;
- ``config``: ``CaptureConfig`` (what a batch is, checked on construction), the retry
  policy, the redaction of secrets;
- ``batch``: opening a batch (prompts, tokenizer, boundary ids, the output directory's
  state; one controller per batch directory is ``core.shards.batchdir.lock``);
- ``prompts`` / ``records``: prompt files streamed record by record, and a record's
  messages and tools; ``partition`` / ``partsource``: one ``--shard I/N`` slice of them;
  ``scheduler_env``: the slice ``--shard auto`` takes from a scheduler's environment;
- ``render``: prompt records to prompt ids off the event loop, into a bounded job queue;
- ``conversation`` / ``turns``: multi-turn planning and driving (``--turns all``);
- ``servers``: clients, the pool and what the servers say they serve; ``dispatch``: the
  pool, least-loaded first; ``routed``: a capture through SGLang's router; ``healthloop``:
  pausing failing servers and re-admitting healed ones;
- ``sender``: one job sent until it succeeds, fails for good or the batch stops;
  ``retry``: what a failure means; ``rids``: request ids that can be aborted;
  ``drain``: stopping, in-flight requests first;
- ``settle``: where each outcome goes; ``rows``: a generation to a shard row;
  ``sink``: rows to shards in a writer thread; ``failures`` / ``rejects``: the
  ``failures.jsonl`` and ``rejects.jsonl`` files;
- ``progress``: live counters and immutable snapshots; ``events``: per-request events for
  an optional sink; ``report``: progress lines and the summary, as text;
- ``replay``: a prompt set sent once through the same rendering, pool and sender, nothing
  written, each answer's acceptance kept; ``acceptance``: ``eagle-tui accept``'s call (replay,
  A/B, stored results, a batch's held-out split; docs/acceptance.md).
"""
