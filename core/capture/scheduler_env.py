"""``capture --shard auto``: the slice (a :class:`Partition`) from the scheduler that started
this process, checked, with what the manifest records about where it ran.

Read from the environment (pure: the caller passes it and the host name):

- **Slurm job arrays** (``sbatch --array``): the slice index is ``SLURM_ARRAY_TASK_ID``
  itself, always. The count comes from ``--shard auto/N`` when given, else from the array,
  but only when its ids are exactly ``0..N-1`` (``SLURM_ARRAY_TASK_MIN`` = 0 and
  ``SLURM_ARRAY_TASK_MAX`` = ``SLURM_ARRAY_TASK_COUNT`` - 1; without a COUNT, as on an old
  Slurm, ``MIN`` = 0 gives N = ``MAX`` + 1). Arrays numbered otherwise (``--array=1-4``,
  ``--array=0-15:2``, ``--array=1,3,7``) are refused without ``auto/N``: taking "the k-th task
  of the array" as slice k would make ``--array=0-15:2`` and a later ``--array=1-15:2`` capture
  the same eight slices, and re-running one failed task (``--array=5``) capture everything.
  With ``auto/N`` any ids are accepted when the largest (``MAX``) is below N, so
  ``--array=5 --shard auto/16`` re-runs slice 5 of 16.
- **Kubernetes Indexed Jobs**: ``JOB_COMPLETION_INDEX``; Kubernetes does not tell a pod the
  Job's completions, so the count is ``--shard auto/N``. The job name and the node come from
  ``JOB_NAME`` and ``NODE_NAME`` when the pod sets them (the downward API; the manifest in
  docs/large-capture.md does), else the pod's host name.
- **torchrun** (``RANK``/``WORLD_SIZE``), **Open MPI** (``OMPI_COMM_WORLD_RANK``/``_SIZE``),
  **MPICH / Intel MPI** (``PMI_RANK``/``PMI_SIZE``): rank of size; ``auto/N`` must equal the
  size (the ranks always cover ``0..size-1``).

Refused, with what to set: no scheduler's variables; a variable that is not a whole number or
comes without its partner (``RANK`` without ``WORLD_SIZE``); a count that is missing or that
``auto/N`` contradicts; two schedulers whose variables disagree (an Open MPI rank 0 of 1 inside
Slurm array task 3 of 4); ``srun`` starting several processes in one array task (they would
all capture the same slice). Schedulers that agree are fine; the outermost one (Slurm, then
Kubernetes, then the launchers) is recorded, because it is the one that requeues.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.manifest import SchedulerRun

_AUTO = re.compile(r"^\s*auto\s*(?:/\s*(\S+?)\s*)?$")
_WHOLE = re.compile(r"^\d+$")
_I_OF_N = re.compile(r"^\s*\d+\s*/\s*\d+\s*$")
_WHAT_TO_SET = ("run the capture as a Slurm array task (sbatch --array=0-N-1), a Kubernetes "
                "Indexed Job pod (JOB_COMPLETION_INDEX, with --shard auto/N), under torchrun "
                "(RANK, WORLD_SIZE) or mpirun (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE), or give "
                "the slice yourself: --shard I/N")


class Scheduler(StrEnum):
    """Who said which slice this process captures (outermost first)."""

    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    TORCHRUN = "torchrun"
    OPEN_MPI = "openmpi"
    PMI = "pmi"


@dataclass(frozen=True)
class AutoShard:
    """``--shard auto`` (the count from the environment) or ``--shard auto/N``."""

    count: int | None = None

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 1:
            raise ConfigError(f"--shard auto/{self.count}: N must be at least 1 (e.g. auto/4)")

    @classmethod
    def parse(cls, text: str) -> AutoShard | None:
        """``"auto"`` / ``"auto/N"`` -> AutoShard; None when ``text`` is not of that form."""
        match = _AUTO.match(text)
        if match is None:
            return None
        if match[1] is None:
            return cls()
        if not _WHOLE.match(match[1]):
            raise ConfigError(f"--shard {text.strip()!r}: want auto or auto/N with N a whole "
                              "number, e.g. auto/4")
        return cls(int(match[1]))

    def __str__(self) -> str:
        return "auto" if self.count is None else f"auto/{self.count}"


def parse_shard(text: str) -> Partition | AutoShard:
    """``--shard``'s value: ``I/N``, ``auto`` or ``auto/N`` (ConfigError for anything else)."""
    auto = AutoShard.parse(text)
    if auto is not None:
        return auto
    if not _I_OF_N.match(text):
        raise ConfigError(f"--shard {text!r}: want I/N (e.g. 0/4), auto (the slice from the "
                          "scheduler: Slurm array, Kubernetes Indexed Job, torchrun, MPI) or "
                          "auto/N")
    return Partition.parse(text)


@dataclass(frozen=True)
class SchedulerSlice:
    """The slice the scheduler gave this process and where it runs (for the manifest)."""

    partition: Partition
    scheduler: Scheduler
    job_id: str | None          # Slurm's array job id, the Kubernetes Job, torchrun's run id
    task_id: str                # the array task id, completion index or rank, as set
    restart_count: int | None   # None: the scheduler does not say (Kubernetes, MPI)
    node: str
    evidence: tuple[str, ...]   # the variables that decided, "NAME=value"

    def record(self) -> dict[str, str | int]:
        """What a manifest keeps (stable keys; unknown values left out)."""
        fields: dict[str, str | int | None] = {
            "shard": str(self.partition), "scheduler": str(self.scheduler),
            "job_id": self.job_id, "task_id": self.task_id,
            "restart_count": self.restart_count, "node": self.node,
            "from": " ".join(self.evidence)}
        return {key: value for key, value in fields.items() if value is not None}

    def run_record(self, started_at: str) -> SchedulerRun:
        """This start, as the manifest's ``extra.scheduler_runs`` keeps it."""
        return SchedulerRun(shard=str(self.partition), scheduler=str(self.scheduler),
                            task_id=self.task_id, node=self.node, job_id=self.job_id,
                            restart_count=self.restart_count, evidence=" ".join(self.evidence),
                            started_at=started_at)

    def describe(self) -> str:
        """One line for the log, e.g. ``slice 3/4 from slurm job 812 task 3 on node gpu07``."""
        job = f" job {self.job_id}" if self.job_id else ""
        restarts = f", restart {self.restart_count}" if self.restart_count else ""
        return (f"slice {self.partition} from {self.scheduler}{job} task {self.task_id} "
                f"on node {self.node}{restarts}")


@dataclass(frozen=True)
class _Claim:
    """One scheduler's answer before the count is settled."""

    scheduler: Scheduler
    index: int
    count: int | None       # from the environment; None when it does not say
    exact_count: bool       # True: auto/N must equal count (ranks); False: N > highest will do
    highest: int            # the largest index any process of this job has
    needs_count: str        # what to say when N is needed and neither side has it
    job_id: str | None
    task_id: str
    restart_count: int | None
    node: str
    evidence: tuple[str, ...]


def slice_from_environment(auto: AutoShard, env: Mapping[str, str],
                           hostname: str | None = None) -> SchedulerSlice:
    """The slice ``--shard auto`` (or ``auto/N``) means in ``env`` (ConfigError if none or
    several disagreeing); ``hostname`` defaults to this machine's."""
    host = hostname if hostname is not None else socket.gethostname()
    claims = [claim for read in _READERS if (claim := read(env, host)) is not None]
    if not claims:
        raise ConfigError(f"--shard {auto}: no scheduler slice in the environment"
                          f"{_slurm_hint(env)}: {_WHAT_TO_SET}")
    _check_agree(claims)
    first = claims[0]
    count = _settle_count(auto, claims)
    return SchedulerSlice(Partition(first.index, count), first.scheduler, first.job_id,
                          first.task_id, first.restart_count, first.node,
                          tuple(e for c in claims for e in c.evidence))


def _slurm_hint(env: Mapping[str, str]) -> str:
    job = env.get("SLURM_JOB_ID")
    return f" (Slurm job {job} is not an array task)" if job else ""


def _check_agree(claims: list[_Claim]) -> None:
    for one, other in combinations(claims, 2):
        counts = {c.count for c in (one, other) if c.count is not None}
        if other.index != one.index or len(counts) > 1:
            raise ConfigError(
                f"--shard auto: {one.scheduler} ({' '.join(one.evidence)}) and "
                f"{other.scheduler} ({' '.join(other.evidence)}) name different slices: unset "
                "the variables of the one that does not start the capture, or give --shard I/N")


def _settle_count(auto: AutoShard, claims: list[_Claim]) -> int:
    known = next((c.count for c in claims if c.count is not None), None)
    count = auto.count if auto.count is not None else known
    if count is None:
        raise ConfigError(f"--shard auto: {claims[0].needs_count}")
    for claim in claims:
        _check_count(auto, count, claim)
    return count


def _check_count(auto: AutoShard, count: int, claim: _Claim) -> None:
    said = " ".join(claim.evidence)
    if claim.exact_count and claim.count is not None and claim.count != count:
        raise ConfigError(f"--shard {auto}: {claim.scheduler} runs {claim.count} "
                          f"processes ({said}): give --shard auto/{claim.count} or plain auto")
    if claim.highest >= count:
        raise ConfigError(f"--shard {auto}: {claim.scheduler} numbers this job's tasks up to "
                          f"{claim.highest} ({said}), past slice {count - 1} of {count}: give "
                          f"N > {claim.highest}, or renumber the tasks from 0")


# -- one reader per scheduler ----------------------------------------------------------------


def _whole(env: Mapping[str, str], name: str) -> int | None:
    """``env[name]`` as a whole number ≥ 0; None when unset; ConfigError when it is not one."""
    value = env.get(name)
    if value is None:
        return None
    if not _WHOLE.match(value.strip()):
        raise ConfigError(f"--shard auto: {name}={value!r} is not a whole number: the scheduler "
                          "sets it; does the job script overwrite it?")
    return int(value)


def _seen(env: Mapping[str, str], *names: str) -> tuple[str, ...]:
    return tuple(f"{name}={env[name]}" for name in names if name in env)


def _slurm(env: Mapping[str, str], host: str) -> _Claim | None:
    task = _whole(env, "SLURM_ARRAY_TASK_ID")
    if task is None:
        return None
    low, high = _whole(env, "SLURM_ARRAY_TASK_MIN"), _whole(env, "SLURM_ARRAY_TASK_MAX")
    total = _whole(env, "SLURM_ARRAY_TASK_COUNT")
    evidence = _seen(env, "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
                     "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX")
    _check_slurm_shape(task, low, high, total, evidence)
    _refuse_several_per_task(env, task)
    return _Claim(Scheduler.SLURM, task, _zero_based_count(low, high, total), False,
                  high if high is not None else task, _slurm_needs_count(task, low, high, total),
                  env.get("SLURM_ARRAY_JOB_ID") or env.get("SLURM_JOB_ID"), str(task),
                  _whole(env, "SLURM_RESTART_COUNT") or 0,
                  env.get("SLURMD_NODENAME") or host, evidence)


def _check_slurm_shape(task: int, low: int | None, high: int | None, total: int | None,
                       evidence: tuple[str, ...]) -> None:
    broken = ((low is not None and task < low) or (high is not None and task > high)
              or total == 0)
    if broken:
        raise ConfigError(f"--shard auto: the Slurm array variables do not fit together "
                          f"({' '.join(evidence)}): the scheduler sets them; does the job "
                          "script overwrite one?")


def _zero_based_count(low: int | None, high: int | None, total: int | None) -> int | None:
    """N when the array's ids are exactly 0..N-1, else None."""
    if low != 0 or high is None:
        return None
    if total is None:
        return high + 1   # an old Slurm without the COUNT: trust MIN/MAX
    return total if high == total - 1 else None


def _slurm_needs_count(task: int, low: int | None, high: int | None,
                       total: int | None) -> str:
    if low is None or high is None:
        shape = f"Slurm array task {task} does not say its array's ids (SLURM_ARRAY_TASK_MIN/MAX)"
    else:
        many = f"{total} tasks" if total is not None else "tasks"
        shape = (f"the Slurm array's {many} have ids from {low} to {high}, not 0..N-1, so "
                 "its count is not the number of slices")
    return (f"{shape}: submit sbatch --array=0-N-1, or give the count with --shard auto/N "
            f"(the task id is the slice: --array={task} --shard auto/16 captures slice {task} "
            "of 16)")


def _refuse_several_per_task(env: Mapping[str, str], task: int) -> None:
    tasks = _whole(env, "SLURM_STEP_NUM_TASKS")
    if tasks is not None and tasks > 1:
        raise ConfigError(f"--shard auto: srun started {tasks} processes in Slurm array task "
                          f"{task} (SLURM_STEP_NUM_TASKS={tasks}), and each would capture slice "
                          f"{task}: start one capture per array task (srun -n 1, or no srun)")


def _kubernetes(env: Mapping[str, str], host: str) -> _Claim | None:
    index = _whole(env, "JOB_COMPLETION_INDEX")
    if index is None:
        return None
    needs = (f"a Kubernetes Indexed Job gives the index (JOB_COMPLETION_INDEX={index}) but not "
             "the count: give --shard auto/N with N = the Job's spec.completions")
    return _Claim(Scheduler.KUBERNETES, index, None, False, index, needs, env.get("JOB_NAME"),
                  str(index), None, env.get("NODE_NAME") or host,
                  _seen(env, "JOB_COMPLETION_INDEX"))


def _ranked(scheduler: Scheduler, rank_name: str, size_name: str,
            job_name: str | None = None, restarts_name: str | None = None,
            ) -> Callable[[Mapping[str, str], str], _Claim | None]:
    """A reader for a launcher that gives each process a rank of a size."""
    def read(env: Mapping[str, str], host: str) -> _Claim | None:
        rank, size = _whole(env, rank_name), _whole(env, size_name)
        if rank is None and size is None:
            return None
        evidence = _seen(env, rank_name, size_name)
        if rank is None or size is None:
            missing = size_name if rank is not None else rank_name
            raise ConfigError(f"--shard auto: {' '.join(evidence)} is set but {missing} is not: "
                              f"{scheduler} sets both; set both, or unset {evidence[0]}")
        if rank >= size:
            raise ConfigError(f"--shard auto: {' '.join(evidence)}: a rank must be below the "
                              "size; does the job script overwrite one?")
        return _Claim(scheduler, rank, size, True, size - 1, "",
                      env.get(job_name) if job_name else None, str(rank),
                      _whole(env, restarts_name) if restarts_name else None, host, evidence)
    return read


_READERS: tuple[Callable[[Mapping[str, str], str], _Claim | None], ...] = (
    _slurm,
    _kubernetes,
    _ranked(Scheduler.TORCHRUN, "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_RESTART_COUNT"),
    _ranked(Scheduler.OPEN_MPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    _ranked(Scheduler.PMI, "PMI_RANK", "PMI_SIZE"),
)
