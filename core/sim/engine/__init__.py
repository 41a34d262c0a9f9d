"""The scheduler side: continuous batching, requests in flight, prefix cache, limits, counters."""
