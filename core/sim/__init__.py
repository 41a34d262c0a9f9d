"""A simulated SGLang 0.5.23 server: the demo's server and every test's server.

It follows SGLang 0.5.23's behaviour, checked against recordings of a real
server (tests/fixtures/realsrv), on every path a capture client uses: the start-up log (with ``\\r``
progress bars, per-rank tags) and a closed port until "weights" are loaded,
``/health`` 503 then 200, ``/generate`` (single, batch, streaming cumulative or
incremental, SGLang's three layers of 400s), ``/abort_request``, the info
routes, ``/metrics``, the SIGTERM drain, and faults on demand.

Run it with ``python -m core.sim --help``; from tests, use ``launcher.SimProcess``.

Map of the package:

- ``cli``, ``config``: flags to a frozen SimConfig; ``main``: start-up, then uvicorn;
- ``startup``, ``startup_faults``: the phases before the port opens; ``warmup``: ready;
- ``app``, ``routes_*``: Starlette routes; ``shutdown``: SIGTERM drain; ``death``: dying;
- ``body_gate``, ``contract``, ``normalize``: SGLang's three layers of 400s;
- ``scheduler``, ``request``: continuous batching; ``model``, ``words``, ``prompt_shape``,
  ``tool_calls``: the fake Kimi-shaped model;
- ``payload``, ``sse``, ``detok``, ``logprobs``: response bodies and streams;
- ``logsink``, ``progress``, ``batchlog``, ``http_logging``: the log;
- ``server_info``, ``recorded``, ``capacity``: info bodies and limits;
- ``launcher``: run the sim as a separate process (tests, demos, benchmarks).
"""
