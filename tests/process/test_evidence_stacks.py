"""The stuck-point classifier on real py-spy dumps of real SGLang 0.5.23 made to hang
(tests/fixtures/pyspy, recorded by scripts/realsglang/record_evidence.py; provenance in its
README), and rank folding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle_tui.core.proc.pyspy import DumpStatus, Frame, StackDump, ThreadStack, parse_json
from eagle_tui.core.proc.stacks import (
    Fold,
    RankPlace,
    classify,
    describe_folds,
    fold,
    place_of_thread,
)
from eagle_tui.core.proc.stuckpoints import POINTS, Point, point_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pyspy"


def recorded(case: str, label: str) -> StackDump:
    """A recorded dump as ``pyspy.dump`` would return it (the PID from the recording)."""
    summary = json.loads((FIXTURES / case / "evidence.json").read_text())
    pid = summary["dumps"][label]["pid"]
    data = json.loads((FIXTURES / case / f"pyspy-{label}.json").read_text())
    return StackDump(pid, DumpStatus.OK, parse_json(data))


def wait_of(case: str, label: str) -> str | None:
    summary = json.loads((FIXTURES / case / "evidence.json").read_text())
    return summary["dumps"][label]["wait_syscall"]


def test_node_0_alone_waits_for_peers_in_the_tcpstore_rendezvous() -> None:
    place = classify(recorded("peers", "TP0"), wait_of("peers", "TP0"))
    assert place is not None and place.point is Point.PEERS and place.stuck and place.waiting
    assert place.path == ("distributed init",)
    assert place.function == "_create_c10d_store"
    assert place.describe() == (
        "distributed init → waiting for peers: torch.distributed rendezvous (TCPStore), "
        "in _create_c10d_store (torch/distributed/rendezvous.py:215)"
    )


def test_a_fifo_shard_reads_as_reading_weights_naming_the_file() -> None:
    place = classify(recorded("fifo", "scheduler"), wait_of("fifo", "scheduler"))
    assert place is not None and place.point is Point.WEIGHTS and place.stuck
    assert place.detail == "model.safetensors"
    assert place.path == ("load_model", "load_weights")
    assert "buffered_multi_thread_safetensors_weights_iterator" in place.describe()
    # the loader's worker thread is the one blocked on the shard; it says the same
    worker = next(t for t in recorded("fifo", "scheduler").threads if t.name != "MainThread")
    alone = place_of_thread(worker)
    assert (alone.point, alone.detail) == (Point.WEIGHTS, "model.safetensors")


def test_a_stopped_rank_is_read_where_the_signal_caught_it() -> None:
    # two recordings: SIGSTOP after "Load weight begin" caught the rank once reserving its
    # RoPE cache after loading (no stuck point: the state says "stopped", not the stack),
    # once loading its tokenizer
    summary = json.loads((FIXTURES / "stop" / "evidence.json").read_text())
    assert summary["dumps"]["scheduler"] == {"pid": summary["hang"]["stopped_pid"],
        "state": "stopped", "nonblocking": True, "wait_syscall": "?"}  # fmt: skip
    place = classify(recorded("stop", "scheduler"))
    assert place is not None and place.point is Point.UNKNOWN and not place.stuck
    assert place.path == ("load_model",)
    assert place.describe() == (
        "load_model → Tensor.__rdiv__ (torch/_tensor.py:1122), a place not in the catalogue"
    )
    tokenizer = classify(recorded("stop-in-tokenizer", "scheduler"))
    assert tokenizer is not None and tokenizer.point is Point.TOKENIZER
    assert tokenizer.function == "from_pretrained" and not tokenizer.waiting


@pytest.mark.parametrize(
    ("label", "words"),
    [
        ("scheduler", "idle, waiting for requests"),
        ("detokenizer", "idle, waiting for requests"),
        ("launcher", "serving HTTP (uvicorn)"),
        ("resource_tracker", "multiprocessing's resource tracker"),
    ],
)
def test_a_ready_server_is_idle_and_nothing_is_stuck(label: str, words: str) -> None:
    place = classify(recorded("plain", label), wait_of("plain", label))
    assert place is not None and place.point is Point.SERVING and not place.stuck
    assert place.words == words


def test_a_launcher_waiting_for_its_ranks_is_not_itself_stuck() -> None:
    for case in ("peers", "fifo", "stop"):
        place = classify(recorded(case, "launcher"))
        assert place is not None and place.point is Point.CHILDREN and not place.stuck, case


def test_ranks_in_the_same_place_fold_into_one_line() -> None:
    peers, fifo = recorded("peers", "TP0"), recorded("fifo", "scheduler")
    places = [RankPlace(f"TP{i}", 100 + i, classify(peers)) for i in range(7)]
    places.append(RankPlace("TP7", 107, classify(fifo)))
    places.append(RankPlace("TP8", 108, None, "no permission: py-spy needs ptrace permission"))
    folds = fold(places)
    assert [f.labels for f in folds] == ["TP0-6", "TP7", "TP8"]
    assert folds[0].pids == tuple(range(100, 107))
    text = describe_folds(folds)
    assert text.startswith("TP0-6 in distributed init → waiting for peers")
    assert "; TP7 in load_model → load_weights → reading weights model.safetensors, in " in text
    assert text.endswith("; TP8: no stack (no permission: py-spy needs ptrace permission)")
    assert isinstance(folds[0], Fold)


def test_a_failed_dump_has_no_place() -> None:
    assert classify(StackDump(1, DumpStatus.NO_PERMISSION, message="Permission Denied")) is None


def test_every_catalogue_entry_names_where_it_matches() -> None:
    # every entry is reachable: a frame shaped like its own description matches it first
    for entry in POINTS:
        for function in sorted(entry.functions) or ["anything"]:
            filename = "/site-packages/" + (entry.files[0] if entry.files else "x.py")
            found = point_of(f"Owner.{function}", filename)
            assert found is not None and found.point is entry.point, (function, entry)


def stack(*frames: tuple[str, str, int]) -> StackDump:
    """A one-thread dump, innermost frame first, as py-spy prints a GPU rank's frames."""
    shown = tuple(Frame(f, path, path.rsplit("/", 1)[-1], line) for f, path, line in frames)
    thread = ThreadStack(1, 1, "MainThread", False, False, shown)
    return StackDump(1, DumpStatus.OK, (thread,))


SITE = "/venv/lib/python3.11/site-packages/"
COMM = SITE + "sglang/srt/distributed/device_communicators/"
# Frames of SGLang 0.5.23 and torch 2.14 on a GPU rank (function names and files from the
# installed source: parallel_state.py GroupCoordinator.barrier calls torch.distributed.barrier;
# pynccl.py PyNcclCommunicator.__init__ calls NCCLLibrary.ncclCommInitRank).
BARRIER = stack(
    ("barrier", SITE + "torch/distributed/distributed_c10d.py", 6320),
    ("_exception_logger.<locals>.wrapper", SITE + "torch/distributed/c10d_logger.py", 83),
    ("GroupCoordinator.barrier", SITE + "sglang/srt/distributed/parallel_state.py", 2060),
    ("ModelRunner.load_model", SITE + "sglang/srt/model_executor/model_runner.py", 1330),
)
NCCL_INIT = stack(
    ("NCCLLibrary.ncclCommInitRank", COMM + "pynccl_wrapper.py", 520),
    ("PyNcclCommunicator.__init__", COMM + "pynccl.py", 129),
    ("GroupCoordinator.__init__", SITE + "sglang/srt/distributed/parallel_state.py", 400),
    ("initialize_model_parallel", SITE + "sglang/srt/distributed/parallel_state.py", 2600),
)  # fmt: skip


def test_gpu_ranks_in_a_barrier_and_in_nccl_init_fold_as_a_person_says_it() -> None:
    barrier, nccl = classify(BARRIER), classify(NCCL_INIT)
    assert barrier is not None and barrier.point is Point.COLLECTIVE
    assert nccl is not None and nccl.point is Point.COMMUNICATOR
    assert nccl.path == ("distributed init",)
    fifo = classify(recorded("fifo", "scheduler"))
    places = [RankPlace(f"TP{i}", i, barrier) for i in range(7)]
    folds = fold([*places, RankPlace("TP7", 7, fifo)])
    assert describe_folds(folds).startswith(
        "TP0-6 in load_model → barrier(); TP7 in load_model → load_weights → reading weights"
    )
    assert describe_folds(fold([RankPlace("TP0", 0, nccl)])) == (
        "TP0 in distributed init → creating NCCL communicators, in "
        "NCCLLibrary.ncclCommInitRank (pynccl_wrapper.py:520)"
    )


def test_a_rank_outside_the_catalogue_reads_as_a_sentence() -> None:
    """The demo's rank is a ``python -c`` script: "TP0 in not in the catalogue, in <module>"
    was on the Server card; a sleeping or threadless rank read as badly."""
    script = stack(("<module>", "<string>", 10))
    assert describe_folds(fold([RankPlace("TP0", 1, classify(script))])) == (
        "TP0 in <module> (<string>:10), a place not in the catalogue")
    asleep = classify(script, wait_syscall="clock_nanosleep")
    assert describe_folds(fold([RankPlace("TP0", 1, asleep)])) == (
        "TP0 in a sleep (a retry loop?), in <module> (<string>:10)")
    threadless = classify(StackDump(1, DumpStatus.OK, ()))
    assert describe_folds(fold([RankPlace("TP0", 1, threadless)])) == (
        "TP0 in a process with no Python threads")
