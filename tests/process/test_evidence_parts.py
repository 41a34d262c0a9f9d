"""The pure parts of the process evidence: titles, the rendezvous from a command line, the
connection table's addresses, rank folding and the sentences a person reads."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from eagle_tui.core.proc.evidence import FileEvidence, FileKind, byte_size, state_of
from eagle_tui.core.proc.files import file_kind
from eagle_tui.core.proc.peers import DistInit, PeerEvidence, TcpRow, _endpoint, peer_evidence
from eagle_tui.core.proc.stacks import compress_labels
from eagle_tui.core.proc.titles import Kind, role_of
from eagle_tui.core.serverlog.serverargs import extract_server_args


@pytest.mark.parametrize(
    ("title", "kind", "label"),
    [
        # the titles SGLang 0.5.23 sets (managers/scheduler.py configure_scheduler_process)
        ("sglang::scheduler", Kind.SCHEDULER, "scheduler"),
        ("sglang::scheduler_TP0", Kind.SCHEDULER, "TP0"),
        ("sglang::scheduler_DP1_TP3", Kind.SCHEDULER, "DP1 TP3"),
        ("sglang::scheduler_DP0_PP1_TP2_EP2", Kind.SCHEDULER, "DP0 PP1 TP2 EP2"),
        ("sglang::scheduler_DP0_ATTN_CP1_MOE_DP2_TP5", Kind.SCHEDULER, "DP0 ATTN_CP1 MOE_DP2 TP5"),
        ("sglang::detokenizer", Kind.DETOKENIZER, "detokenizer"),
        ("sglang::data_parallel_controller", Kind.CONTROLLER, "data parallel controller"),
        ("sglang::tokenizer_worker:4242", Kind.TOKENIZER, "tokenizer worker"),
        ("sgl_diffusion::scheduler_3", Kind.SCHEDULER, "TP3"),
    ],
)
def test_roles_come_from_the_full_title_not_the_15_character_comm(
    title: str, kind: Kind, label: str
) -> None:
    role = role_of([title], title[:15], is_root=False)
    assert (role.kind, role.label) == (kind, label)


def test_the_root_is_the_launcher_and_compilers_are_known_by_program() -> None:
    argv = ["/venv/bin/python", "-m", "sglang.launch_server", "--tp-size", "8"]
    assert role_of(argv, "python", is_root=True).kind is Kind.LAUNCHER
    assert role_of(["/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", "-quiet"], "cc1plus",
                   is_root=False).label == "cc1plus"  # fmt: skip
    nvcc = role_of(["/usr/local/cuda/bin/nvcc", "-c", "x.cu"], "nvcc", is_root=False)
    assert nvcc.kind is Kind.COMPILER
    assert role_of(["python3", "-c", "pass"], "python3", is_root=False).kind is Kind.OTHER
    ranks = [role_of([f"sglang::scheduler_TP{i}"], "", is_root=False) for i in (10, 2)]
    assert [r.label for r in sorted(ranks, key=lambda r: r.sort_key)] == ["TP2", "TP10"]


def test_the_rendezvous_is_read_from_the_command_line() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--tp-size", "16", "--nnodes", "2",
            "--node-rank=1", "--dist-init-addr", "10.0.0.1:5000"]  # fmt: skip
    dist = DistInit.from_argv(argv)
    assert dist == DistInit("10.0.0.1", 5000, nnodes=2, node_rank=1, world_size=16)
    assert dist.ranks_per_node == 8 and dist.node_ranks(1) == range(8, 16)
    old = DistInit.from_argv(["--nccl-init-addr", "[fe80::1]:29500", "--tp", "4", "--pp-size", "2"])
    assert old is not None and (old.host, old.port, old.world_size) == ("fe80::1", 29500, 8)
    assert old.address == "[fe80::1]:29500"
    assert DistInit.from_argv(["--tp", "2"]) is None
    assert DistInit.from_argv(["--dist-init-addr", "nohost"]) is None


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def server_args_of(log: Path) -> dict[str, str]:
    line = next(line for line in log.read_text().splitlines() if "server_args=" in line)
    return extract_server_args(line.split("server_args=", 1)[1])


def test_the_rendezvous_is_read_from_the_logged_server_args_of_real_sglang() -> None:
    """What the server resolved, where the command line may say nothing (a ``--config``
    file, a default): a 2-node DeepSeek-R1 log from a public issue (``ServerArgs(…)``) and
    real SGLang 0.5.23's node 0 alone (``{…}``)."""
    old = server_args_of(FIXTURES / "serverlogs" / "02-deepseek-r1-2node-h800-ready.log")
    assert DistInit.from_server_args(old) == DistInit("10.0.0.15", 5000, 2, 0, 16)
    new = server_args_of(FIXTURES / "pyspy" / "peers" / "server.log")
    assert DistInit.from_server_args(new) == DistInit("127.0.0.1", 37013, 2, 0, 2)
    assert DistInit.from_server_args({"dist_init_addr": "None", "tp_size": "8"}) is None
    assert DistInit.from_server_args({}) is None


def test_connection_table_addresses_decode_in_host_byte_order() -> None:
    # /proc/net/tcp rows for 127.0.0.1:8080 and [::1]:443, as the kernel prints them
    assert _endpoint("0100007F:1F90", socket.AF_INET) == ("127.0.0.1", 8080)
    assert _endpoint("00000000000000000000000001000000:01BB", socket.AF_INET6) == ("::1", 443)


def test_peers_count_the_ranks_the_store_accepted_and_name_the_missing_node() -> None:
    dist = DistInit("127.0.0.1", 5000, nnodes=2, node_rank=0, world_size=2)
    rows = [
        TcpRow(("127.0.0.1", 5000), ("0.0.0.0", 0), "LISTEN", 11),
        TcpRow(("127.0.0.1", 40001), ("127.0.0.1", 5000), "ESTABLISHED", 12),  # our client
        TcpRow(("127.0.0.1", 5000), ("127.0.0.1", 40001), "ESTABLISHED", 13),  # its accept
    ]
    alone = peer_evidence(dist, rows, tree_sockets={11, 12, 13})
    assert (alone.hosts_store, alone.joined, alone.remote, alone.missing) == (True, 1, (), 1)
    assert alone.missing_nodes() == (1,)
    assert alone.describe() == (
        "distributed init 127.0.0.1:5000: this node hosts the store; 1 of 2 ranks connected; "
        "missing node 1 (rank 1)"
    )
    joined = [*rows, TcpRow(("127.0.0.1", 5000), ("10.0.0.2", 39999), "ESTABLISHED", 14)]
    full = peer_evidence(dist, joined, tree_sockets={11, 12, 13, 14})
    assert (full.joined, full.remote, full.missing, full.missing_nodes()) == (
        2, ("10.0.0.2:39999",), 0, ())  # fmt: skip
    assert "2 of 2 ranks connected" in full.describe() and "missing" not in full.describe()


def test_a_node_that_is_not_node_0_says_whether_it_reached_the_store() -> None:
    dist = DistInit("10.0.0.1", 5000, nnodes=2, node_rank=1, world_size=2)
    trying = peer_evidence(dist, [TcpRow(("10.0.0.2", 4000), ("10.0.0.1", 5000), "SYN_SENT", 7)],
                           tree_sockets={7})  # fmt: skip
    assert trying.describe() == (
        "distributed init 10.0.0.1:5000: node 1 still trying to connect (no answer)"
    )
    assert "no connection" in peer_evidence(dist, [], tree_sockets=set()).describe()
    theirs = peer_evidence(dist, [TcpRow(("0.0.0.0", 5000), ("0.0.0.0", 0), "LISTEN", 9)], set())
    assert isinstance(theirs, PeerEvidence) and theirs.foreign_listener
    assert "another process (not this server) listens on port 5000" in theirs.describe()


def test_file_sentences_say_what_is_read_how_far_and_how_long_it_has_not_moved() -> None:
    shard = FileEvidence("/m/model-00012-of-00064.safetensors", FileKind.WEIGHTS, fd=37,
                         size=1000, position=370, bytes_per_s=0.0, still_s=50.0)  # fmt: skip
    assert shard.describe() == "reading model-00012-of-00064.safetensors, 37 %, 0 B/s for 50s"
    moving = FileEvidence("/m/x.bin", FileKind.WEIGHTS, 3, 4000, 1000, 2.5e6, 0.0)
    assert moving.describe() == "reading x.bin, 25 %, 2.5 MB/s"
    lock = FileEvidence("/c/flashinfer/x.lock", FileKind.LOCK, 5, 0, 0, 0.0, 300.0, True)
    assert lock.describe().startswith("holds x.lock")
    mapped = FileEvidence("/m/model.safetensors", FileKind.WEIGHTS, None, 2_000_000, None, None, 9)
    assert mapped.describe() == "has model.safetensors (2.0 MB) mapped (9s)"
    assert [byte_size(v) for v in (0, 999, 1000, 1.5e9, 2e13)] == [
        "0 B", "999 B", "1.0 KB", "1.5 GB", "20.0 TB"]  # fmt: skip


def test_which_files_are_evidence() -> None:
    assert file_kind("/m/model-00001-of-00002.safetensors", 10, False) is FileKind.WEIGHTS
    assert file_kind("/hf/hub/models--x/blobs/4f2a", 10, False) is FileKind.WEIGHTS
    assert (
        file_kind("/root/.cache/flashinfer/90/cached_ops/x/build.ninja", 1, True) is FileKind.CACHE
    )
    assert file_kind("/root/.cache/flashinfer/90/x.lock", 0, True) is FileKind.LOCK
    assert file_kind("/data/blob", 2**30, False) is FileKind.LARGE
    # Python's own .pth files, libraries, logs and devices are not
    assert file_kind("/venv/site-packages/__editable__.x.pth", 120, False) is None
    assert file_kind("/venv/lib/libtorch.so", 2**30, False) is None
    assert file_kind("/m/pytorch_model.bin", 2**30, False) is FileKind.WEIGHTS
    assert file_kind("/var/log/server.log", 2**30, True) is None
    assert file_kind("/dev/nvidia0", None, True) is None
    assert file_kind("socket:[123]", None, False) is None


@pytest.mark.parametrize(
    ("labels", "text"),
    [
        (["TP0", "TP1", "TP2", "TP3", "TP4", "TP5", "TP6"], "TP0-6"),
        (["TP0", "TP1", "TP2", "TP5"], "TP0-2, TP5"),
        (["DP0 TP0", "DP0 TP1", "DP1 TP2"], "DP0 TP0-1, DP1 TP2"),
        (["scheduler"], "scheduler"),
        (["TP7"], "TP7"),
    ],
)
def test_rank_labels_fold_into_ranges(labels: list[str], text: str) -> None:
    assert compress_labels(labels) == text


def test_state_letters() -> None:
    names = ["running", "sleeping", "disk wait", "stopped", "tracing stop", "zombie", "idle"]
    assert [state_of(c).value for c in "RSDTtZI?"] == [*names, "other"]


def test_multiprocessing_helpers_are_named_by_their_job() -> None:
    # what SGLang 0.5.23's launcher tree shows (tests/fixtures/pyspy/*/evidence.json)
    tracker = [
        "/venv/bin/python",
        "-B",
        "-c",
        "from multiprocessing.resource_tracker import main;main(6)",
    ]
    code = "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7, pipe_handle=9)"
    spawned = ["/venv/bin/python", "-B", "-c", code, "--multiprocessing-fork"]
    assert role_of(tracker, "python", is_root=False).label == "resource tracker"
    assert role_of(spawned, "python", is_root=False).label == "spawned child (no title yet)"
