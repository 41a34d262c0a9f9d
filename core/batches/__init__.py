"""Capture batches that outlive the terminal: detached workers and their control API.

- ``detach``: start a batch as a detached worker (``capture --detach``), restart one;
- ``worker`` / ``daemon``: the worker process (engine + control server, one event loop);
- ``control_app`` / ``control_server``: HTTP over a private Unix socket (``sockpath``);
- ``control_client``: ``BatchClient``, used by the TUI and the CLI verbs;
- ``api``: every JSON document of the control API, declared once as msgspec structs;
- ``events`` / ``status`` / ``hub``: the event stream, the status document and the bounded
  event fan-out;
- ``registry`` / ``survey``: the records under the state dir and the derived live state;
- ``monitor``: every batch followed from one process (the dashboard's Capture and Streams
  views): surveyed, acted on and streamed on a loop of its own;
- ``secretenv``: the API key and raw server URLs a worker gets through its environment
  (a record keeps its ``CaptureConfig`` ``without_secrets``);
- ``ready`` / ``runstate``: the start-up report a worker sends its launcher, and how its
  run ended in the registry's terms;
- ``slurmjob``: a Slurm array of ``capture --shard auto`` tasks followed from a head node
  (``squeue`` joined with each slice's manifest; ``batches --slurm-job``).

The ``batches``, ``pause``, ``resume`` and ``stop`` verbs are in ``tui/cli``; one controller
per output directory is ``core.shards.batchdir.lock``.
"""
