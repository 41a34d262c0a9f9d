"""The server as the operating system sees it: process tree, port holder, GPU memory, and
the managed launcher that restarts a server without racing its predecessor.

Modules: ``report`` (immutable results), ``probe`` (process and children), ``ports`` (who
listens on a port), ``discover`` (find a server by command line), ``gpu`` (optional NVML),
``launcher`` (start, stop safely, restart). psutil is untyped; it stays inside these files.
"""
