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

Map of the package (top down: a module imports only those below it, checked by the
"sim layers" contract in ``pyproject.toml``):

- ``args``: the command line (``add_arguments``, ``run``); ``launcher``: run the sim as a
  separate process (tests, demos, benchmarks);
- ``serve``: start-up, then uvicorn;
- ``http/``: the Starlette app and routes, response bodies, SSE, connection tricks;
- ``lifecycle/``: start-up phases and their faults, rank processes that really hang
  (``hangs``: a named pipe, SIGSTOP, a rendezvous nobody joins, a compiler child, a
  leftover child), warm-up, the SIGTERM drain;
- ``context``: the running server (what routes and the lifecycle share);
- ``engine/``: the scheduler, the server's state (phase, requests in flight), faults while
  serving, prefix cache, counters; ``validation/``: SGLang's three layers of 400s;
- ``log/``: the log sink, tqdm bars, uvicorn's lines, SGLang's log dialects, the tracebacks
  it prints and the ways it dies;
- ``server_info``, ``recorded`` (+ ``assets/``): info bodies from recordings;
- ``model/``: the served tokenizer directory, the limits derived from it (capacity) and the
  deterministic Kimi-shaped model;
- ``config``: the frozen SimConfig; ``request``: one generation (validated input, then its
  live output state).
"""
