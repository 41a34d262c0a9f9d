"""The HTTP side: the Starlette app, its routes, response bodies, SSE framing, connection tricks."""
