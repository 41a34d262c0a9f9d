"""The server's life: start-up phases, warm-up, faults, drain on SIGTERM, and the ways it dies."""
