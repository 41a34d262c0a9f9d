"""A stand-in ``sglang`` package for tests: ``python -m sglang.launch_server`` runs the port
holder (tests/support/portholder.py), so the process table shows a real server's command
line. Only ever on the PYTHONPATH of a child process a test spawns."""
