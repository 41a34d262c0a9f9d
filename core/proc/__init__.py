"""The server as the operating system sees it: process tree, port holder, GPU memory, the
managed launcher that restarts a server without racing its predecessor, and the evidence
that says why a start-up is stuck.

Modules: ``report`` (immutable results), ``probe`` (process and children), ``ports`` (who
listens on a port), ``discover`` (find a server by command line), ``gpu`` (optional NVML),
``launcher`` (start, stop safely, restart).

Start-up evidence (docs/startup-diagnosis.md, "Evidence from the processes"): ``sampler``
(``EvidenceSampler.sample(now)`` → ``evidence.TreeEvidence``, every tick), built on
``procfs`` (one /proc file per look), ``titles`` (launcher, scheduler ``TP3``/``DP1 TP3``,
detokenizer, compiler), ``files`` (weight/cache/lock files and read positions), ``blocked``
(the system call and kernel wait of a quiet process) and ``peers`` (ranks connected to the
distributed-init address); ``pyspy`` (``dump(pid)`` → ``StackDump``, never raises),
``stuckpoints`` (the catalogue) and ``stacks`` (``classify``, ``fold``); ``orphans``
(``find_orphans`` → leftover SGLang processes and the command that stops them;
``stop_orphans`` stops them).

psutil is untyped; it stays inside these files.
"""
