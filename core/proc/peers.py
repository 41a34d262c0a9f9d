"""Who is connected to the distributed-init address: how many of the expected ranks joined.

A multi-node SGLang start (``--nnodes N --node-rank R --dist-init-addr HOST:PORT``) has
every rank join torch.distributed through ``tcp://HOST:PORT``: rank 0 (on node 0) runs a
c10d TCPStore server there and every rank, rank 0 included, keeps a client connection to it
(``torch/distributed/rendezvous.py`` ``_create_c10d_store``). So on node 0 the connections
the store accepted count the ranks that joined, and the ones that come from outside this
server's tree are the other nodes' ranks; on another node, an established connection from
the tree says it reached node 0, a ``SYN_SENT`` one that it is still trying.

The connection table is ``/proc/net/tcp`` and ``tcp6`` of the watcher's network namespace;
sockets are tied to processes by the inodes of the tree's descriptors.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "0A": "LISTEN"}
_TP_FLAGS = ("--tp-size", "--tp", "--tensor-parallel-size")
_PP_FLAGS = ("--pp-size", "--pp", "--pipeline-parallel-size")
_ADDR_FLAGS = ("--dist-init-addr", "--nccl-init-addr")


@dataclass(frozen=True)
class DistInit:
    """The distributed-init rendezvous of a server, from its command line.

    ``world_size`` is the number of torch.distributed ranks (tp × pp); None when the
    command line does not say.
    """

    host: str
    port: int
    nnodes: int = 1
    node_rank: int = 0
    world_size: int | None = None

    @property
    def address(self) -> str:
        """``HOST:PORT`` as given (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def ranks_per_node(self) -> int | None:
        """Ranks each node runs, when the world size divides evenly."""
        if self.world_size is None or self.world_size % self.nnodes:
            return None
        return self.world_size // self.nnodes

    def node_ranks(self, node: int) -> range | None:
        """The global ranks node ``node`` runs (``range(2, 4)``), when known."""
        per = self.ranks_per_node
        return None if per is None else range(node * per, (node + 1) * per)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> DistInit | None:
        """From ``--dist-init-addr HOST:PORT`` (or the old ``--nccl-init-addr``), ``--nnodes``,
        ``--node-rank``, ``--tp-size``/``--tp``, ``--pp-size``; None without an address."""
        found = {key: _flag(argv, flags) for key, flags in _FIELD_FLAGS.items()}
        return cls.from_server_args({k: v for k, v in found.items() if v is not None})

    @classmethod
    def from_server_args(cls, fields: Mapping[str, str]) -> DistInit | None:
        """From ``server_args`` fields (``core.serverlog.serverargs``; "None" is absent):
        the values the server resolved, defaults and a ``--config`` file included, where
        the command line may say nothing (the sim's default ``--tp-size`` is 8, SGLang's 1).
        None without an address."""
        parsed = _split_address(fields.get("dist_init_addr", "None"))
        if parsed is None:
            return None
        tp = _int_field(fields, "tp_size", 1)
        pp = _int_field(fields, "pp_size", 1)
        world = tp * pp if tp is not None and pp is not None else None
        nnodes = _int_field(fields, "nnodes", 1) or 1
        node_rank = _int_field(fields, "node_rank", 0) or 0
        return cls(parsed[0], parsed[1], nnodes, node_rank, world)


_FIELD_FLAGS = {"dist_init_addr": _ADDR_FLAGS, "nnodes": ("--nnodes",),
                "node_rank": ("--node-rank",), "tp_size": _TP_FLAGS, "pp_size": _PP_FLAGS}
"""The ``server_args`` field each command-line flag sets."""


@dataclass(frozen=True)
class TcpRow:
    """One socket of the connection table."""

    local: tuple[str, int]
    remote: tuple[str, int]
    state: str
    inode: int


@dataclass(frozen=True)
class PeerEvidence:
    """The rendezvous as the connection table shows it.

    ``hosts_store``: a process of the tree listens on the port (this is node 0's rank 0).
    ``joined``: connections the store accepted (every rank that joined, local ones too);
    ``remote``: those from outside the tree (``ip:port`` of each), i.e. other nodes' ranks.
    ``connected``/``trying``: the tree's own client connections that are established /
    still in SYN_SENT. ``foreign_listener``: something outside the tree holds the port.
    """

    dist: DistInit
    hosts_store: bool
    joined: int
    remote: tuple[str, ...]
    connected: int
    trying: int
    foreign_listener: bool = False

    @property
    def expected(self) -> int | None:
        """How many ranks the store should see: the world size."""
        return self.dist.world_size

    @property
    def missing(self) -> int | None:
        """Ranks not connected yet (store side only), when the world size is known."""
        if not self.hosts_store or self.expected is None:
            return None
        return max(0, self.expected - self.joined)

    def missing_nodes(self) -> tuple[int, ...]:
        """Other nodes none of whose ranks reached the store (store side): when no remote
        rank is connected at all, every other node; else those that cannot be accounted
        for by the connected count (the connection table does not name node ranks)."""
        if not self.hosts_store or self.dist.nnodes <= 1:
            return ()
        per = self.dist.ranks_per_node
        others = [n for n in range(self.dist.nnodes) if n != self.dist.node_rank]
        if not self.remote:
            return tuple(others)
        if per is None:
            return ()
        complete = len(self.remote) // per
        return tuple(others[complete:])

    def describe(self) -> str:
        """``distributed init 127.0.0.1:5000: this node hosts the store; 1 of 2 ranks
        connected; missing node 1 (rank 1)``."""
        head = f"distributed init {self.dist.address}"
        if self.foreign_listener and not self.hosts_store:
            return f"{head}: another process (not this server) listens on port {self.dist.port}"
        if not self.hosts_store:
            if self.connected:
                return f"{head}: node {self.dist.node_rank} connected to the store"
            if self.trying:
                return f"{head}: node {self.dist.node_rank} still trying to connect (no answer)"
            return f"{head}: node {self.dist.node_rank} has no connection to the store"
        of = f" of {self.expected}" if self.expected is not None else ""
        text = f"{head}: this node hosts the store; {self.joined}{of} ranks connected"
        missing = self.missing_nodes()
        if missing and (self.missing or self.expected is None):
            text += "; missing " + ", ".join(self._node_text(n) for n in missing)
        return text

    def _node_text(self, node: int) -> str:
        ranks = self.dist.node_ranks(node)
        if ranks is None:
            return f"node {node}"
        names = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]}"
        return f"node {node} ({names})"


def read_tcp_table(port: int) -> list[TcpRow]:
    """Sockets whose local or remote port is ``port`` (IPv4 and IPv6); [] when unreadable."""
    rows: list[TcpRow] = []
    hexport = f":{port:04X}"
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)
                rows.extend(_parse(line, family) for line in handle if hexport in line)
        except OSError:
            continue
    return [r for r in rows if r.state and port in (r.local[1], r.remote[1])]


def peer_evidence(
    dist: DistInit, rows: Iterable[TcpRow], tree_sockets: Collection[int]
) -> PeerEvidence:
    """Count the rendezvous connections in ``rows``; ``tree_sockets`` are the socket inodes
    the server's tree holds (from its descriptors)."""
    rows = list(rows)
    port = dist.port
    listeners = [r for r in rows if r.state == "LISTEN" and r.local[1] == port]
    hosts = any(r.inode in tree_sockets for r in listeners)
    ours_out = [r for r in rows if r.remote[1] == port and r.inode in tree_sockets]
    our_ends = {r.local for r in ours_out if r.state == "ESTABLISHED"}
    accepted = [
        r for r in rows if r.state == "ESTABLISHED" and r.local[1] == port and r.remote[1] != port
    ]
    remote = tuple(
        f"{_host(r.remote[0])}:{r.remote[1]}" for r in accepted if r.remote not in our_ends
    )
    return PeerEvidence(
        dist=dist,
        hosts_store=hosts,
        joined=len(accepted) if hosts else 0,
        remote=remote if hosts else (),
        connected=sum(r.state == "ESTABLISHED" for r in ours_out),
        trying=sum(r.state == "SYN_SENT" for r in ours_out),
        foreign_listener=bool(listeners) and not hosts,
    )


def _parse(line: str, family: socket.AddressFamily) -> TcpRow:
    fields = line.split()
    if len(fields) < 10:
        return TcpRow(("", 0), ("", 0), "", 0)
    return TcpRow(
        _endpoint(fields[1], family),
        _endpoint(fields[2], family),
        _STATES.get(fields[3], ""),
        int(fields[9]) if fields[9].isdigit() else 0,
    )


def _endpoint(text: str, family: socket.AddressFamily) -> tuple[str, int]:
    """``0100007F:1F90`` → (``127.0.0.1``, 8080): each 32-bit word is in host byte order."""
    address, _, port = text.partition(":")
    raw = b"".join(
        int(address[i : i + 8], 16).to_bytes(4, "little") for i in range(0, len(address), 8)
    )
    try:
        return socket.inet_ntop(family, raw), int(port, 16)
    except (OSError, ValueError):
        return "", 0


def _host(address: str) -> str:
    try:
        mapped = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(mapped, ipaddress.IPv6Address) and mapped.ipv4_mapped is not None:
        return str(mapped.ipv4_mapped)
    return f"[{address}]" if ":" in address else address


def _flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    for index, part in enumerate(argv):
        for name in names:
            if part == name and index + 1 < len(argv):
                return argv[index + 1]
            if part.startswith(name + "="):
                return part.split("=", 1)[1]
    return None


def _int_field(fields: Mapping[str, str], key: str, default: int) -> int | None:
    """``default`` when absent (or "None"); None when not an integer."""
    value = fields.get(key, "None")
    if value == "None":
        return default
    try:
        return int(value)
    except ValueError:
        return None


def _split_address(value: str) -> tuple[str, int] | None:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "0.0.0.0", int(port)


def read_listeners() -> dict[int, int]:
    """Every listening TCP socket here: inode → port (IPv4 and IPv6); {} when unreadable."""
    found: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)
                for line in handle:
                    fields = line.split()
                    if len(fields) >= 10 and fields[3] == "0A" and fields[9].isdigit():
                        found[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
        except (OSError, ValueError):
            continue
    return found
