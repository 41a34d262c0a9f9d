"""A simulated SGLang 0.5.23 server: the demo's server and every test's server.

It follows real SGLang 0.5.23 (docs/sim.md describes the behaviour, checked
against the recordings in tests/fixtures/realsrv) on every path a capture client
uses: the start-up log (with ``\\r`` progress bars, per-rank tags) and a closed
port until "weights" are loaded, ``/health`` 503 then 200, ``/generate``
(single, batch, streaming cumulative or incremental, SGLang's three layers of
400s), ``/abort_request``, the info routes, ``/metrics``, the SIGTERM drain, and
faults on demand.

Run it with ``python -m eagle_tui.core.sim --help``; from tests, use
``launcher.SimProcess``. It never imports the SGLang client (``core.sglang``) nor
the dashboard: it stands in for the server those talk to.

Map of the package:

- ``args``: the command line (``add_arguments``, ``run``); ``config``: the frozen
  SimConfig; ``serve``: start-up, then uvicorn; ``context``: the running server;
- ``lifecycle/``: start-up phases and their faults, warm-up, runtime faults, the
  SIGTERM drain, the ways the server dies, tracebacks, the lifecycle state;
- ``http/``: the Starlette app and routes, response bodies, SSE, connection tricks;
- ``validation/``: SGLang's three layers of 400s for ``/generate``;
- ``engine/``: the scheduler, requests in flight, prefix cache, limits, counters;
- ``model/``: the served tokenizer directory and the deterministic Kimi-shaped model;
- ``log/``: the log sink, tqdm bars, uvicorn's lines, SGLang's log dialects;
- ``server_info``, ``recorded`` (+ ``assets/``): info bodies from recordings;
- ``launcher``: run the sim as a separate process (tests, demos, benchmarks).
"""
