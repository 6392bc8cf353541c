"""Network namespaces for cluster tests: one private network per test, one namespace per node.

Layout for ``NetworkNamespaces(3)`` that claimed subnet ``k`` (prefix ``rvl<k in hex>``):

    root namespace (the test process, i.e. the clients)
        bridge  rvl1fbr  10.213.31.1/24
          |-- veth rvl1fh1  <->  rvl1fn1 10.213.31.11/24  in namespace rvl1f-1  (node 1)
          |-- veth rvl1fh2  <->  rvl1fn2 10.213.31.12/24  in namespace rvl1f-2  (node 2)
          '-- veth rvl1fh3  <->  rvl1fn3 10.213.31.13/24  in namespace rvl1f-3  (node 3)

The namespaces get no default route, only the /24, so nothing started in them can reach
anything outside this network. Faults:

- :meth:`isolate` takes the node's bridge-side veth down: its packets are dropped silently in
  both directions (no RST, no ICMP), for clients and for the other nodes alike, until
  :meth:`heal`. Its TCP connections stay open and resume or time out like after a cable pull.
- :meth:`partition` drops IPv4 between two groups of nodes with ``tc`` (an HTB class whose
  leaf queue holds zero packets, chosen by u32 destination filters on each node's egress);
  clients in the root namespace still reach everyone. :meth:`heal_partition` removes it.

Parallel runs: a subnet index ``k`` is claimed with an ``flock`` on a file in ``LOCK_DIR`` held
for the life of the object, so two runs never share a subnet or a name prefix. A prefix whose
lock nobody holds is a leftover of a crashed run (its lock died with it): :meth:`create` removes
every such leftover, including processes still running in its namespaces.
Cleanup runs on :meth:`close`, on leaving the ``with`` block and at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import re
import signal
import subprocess
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

SUBNET_PREFIX = "10.213"
LOCK_DIR = Path("/run/riverlog-netns")
# Node n gets .(HOST_OFFSET + n); the root namespace (clients) gets .1.
HOST_OFFSET = 10
MAX_NODES = 200
IFNAMSIZ = 15  # Linux interface names are at most 15 characters
IP_TIMEOUT = 30.0


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command failed or no subnet could be claimed; the message says which."""


def _run(args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and result.returncode != 0:
        raise NetnsError(f"{' '.join(args)} failed (exit {result.returncode}): {result.stderr.strip()}")
    return result


def prefix_for(subnet: int) -> str:
    return f"rvl{subnet:02x}"


def _root_subnets_in_use() -> set[int]:
    """Third octets of 10.213.x.y addresses already configured in the root namespace."""
    used: set[int] = set()
    out = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" not in fields:
            continue
        address = fields[fields.index("inet") + 1].split("/")[0]
        parts = address.split(".")
        if ".".join(parts[:2]) == SUBNET_PREFIX:
            used.add(int(parts[2]))
    return used


def _namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _namespace_pids(namespace: str) -> list[int]:
    out = _run(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    names = []
    for line in out.splitlines():
        # "7: rvl1fh1@if6: <BROADCAST,...": the name is the second field, without '@peer' and ':'.
        fields = line.split(":", 2)
        if len(fields) >= 2:
            names.append(fields[1].strip().split("@")[0])
    return names


def _kill_namespace_processes(namespace: str) -> None:
    # Only processes inside one of our own namespaces are touched: they were started there by
    # a harness (this one or a crashed run's), never by anybody else.
    for pid in _namespace_pids(namespace):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def remove_prefix(prefix: str) -> None:
    """Delete every namespace and link named with ``prefix`` (and kill processes inside)."""
    for namespace in _namespaces():
        if namespace.startswith(prefix + "-"):
            _kill_namespace_processes(namespace)
            _run(["ip", "netns", "del", namespace], check=False)
    for link in _links():
        if link.startswith(prefix):
            _run(["ip", "link", "del", link], check=False)


def sweep_stale() -> None:
    """Remove the leftovers of every crashed run, whatever subnet it had: a prefix whose lock
    nobody holds belongs to a process that is gone (a live run, here or in a parallel
    process, holds its lock and is skipped)."""
    names = [*_namespaces(), *_links()]
    prefixes = {name[:5] for name in names if re.fullmatch(r"rvl[0-9a-f]{2}(br|[hn]\d+|-\d+)", name)}
    if not prefixes:
        return
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for prefix in sorted(prefixes):
        with open(LOCK_DIR / f"{int(prefix[3:], 16)}.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            remove_prefix(prefix)  # the lock is released when the file closes


# Live instances, closed at interpreter exit (a crashed or interrupted test session).
_LIVE: weakref.WeakSet[NetworkNamespaces] = weakref.WeakSet()


@atexit.register
def _close_leftovers() -> None:
    for net in list(_LIVE):
        with contextlib.suppress(Exception):
            net.close()


class NetworkNamespaces:
    """A bridge plus ``size`` namespaces (nodes 1..size), each joined to it by a veth pair."""

    def __init__(self, size: int, *, subnet: int | None = None) -> None:
        if not 1 <= size <= MAX_NODES:
            raise ValueError(f"size must be 1..{MAX_NODES}, not {size}")
        if subnet is not None and not 0 <= subnet <= 255:
            raise ValueError(f"subnet must be 0..255, not {subnet}")
        self.size = size
        self._wanted_subnet = subnet
        self.subnet: int | None = None
        self._lock: IO[str] | None = None
        self._isolated: set[int] = set()
        self._partitioned: set[int] = set()
        self._created = False
        self._closed = False

    # --- names and addresses ----------------------------------------------------------------

    @property
    def prefix(self) -> str:
        return prefix_for(self._claimed())

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"{SUBNET_PREFIX}.{self._claimed()}.0/24")

    @property
    def host_address(self) -> str:
        """The root namespace's address on the bridge (the clients' source address)."""
        return f"{SUBNET_PREFIX}.{self._claimed()}.1"

    @property
    def nodes(self) -> range:
        return range(1, self.size + 1)

    def address(self, node: int) -> str:
        self._check_node(node)
        return f"{SUBNET_PREFIX}.{self._claimed()}.{HOST_OFFSET + node}"

    def namespace(self, node: int) -> str:
        self._check_node(node)
        return f"{self.prefix}-{node}"

    def host_veth(self, node: int) -> str:
        """The bridge-side end of the node's veth pair (in the root namespace)."""
        self._check_node(node)
        return f"{self.prefix}h{node}"

    def node_veth(self, node: int) -> str:
        """The node-side end of its veth pair (inside its namespace)."""
        self._check_node(node)
        return f"{self.prefix}n{node}"

    def command_prefix(self, node: int) -> list[str]:
        """Prepend to a command line to run it inside the node's namespace. ``ip netns exec``
        execs the command, so the pid Popen reports is the command's own (signals reach it)."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def _check_node(self, node: int) -> None:
        if node not in self.nodes:
            raise ValueError(f"node {node} is not in 1..{self.size}")

    def _claimed(self) -> int:
        if self.subnet is None:
            raise NetnsError("create() has not claimed a subnet yet")
        return self.subnet

    # --- lifecycle ---------------------------------------------------------------------------

    def create(self) -> NetworkNamespaces:
        if self._created:
            return self
        if self._closed:
            raise NetnsError("closed; make a new NetworkNamespaces")
        sweep_stale()
        self._claim_subnet()
        _LIVE.add(self)
        self._created = True
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _claim_subnet(self) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        if self._wanted_subnet is not None:
            candidates = [self._wanted_subnet]
        else:
            # Start at a pid-dependent index so parallel runs rarely even try the same locks.
            start = os.getpid() % 256
            candidates = [(start + i) % 256 for i in range(256)]
        for k in candidates:
            handle = open(LOCK_DIR / f"{k}.lock", "w")  # noqa: SIM115 - held for the object's life
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            # We hold the lock, so anything with this prefix belongs to a run that is gone.
            remove_prefix(prefix_for(k))
            if k in _root_subnets_in_use():
                # Configured by something that is not a harness of ours: leave it alone.
                handle.close()
                continue
            self.subnet = k
            self._lock = handle
            return
        raise NetnsError(f"no free subnet {SUBNET_PREFIX}.x.0/24 (all locked or in use)")

    def _build(self) -> None:
        prefix_len = self.network.prefixlen
        names = [self.bridge] + [n for i in self.nodes for n in (self.host_veth(i), self.node_veth(i))]
        too_long = [n for n in names if len(n) > IFNAMSIZ]
        if too_long:
            raise NetnsError(f"interface names longer than {IFNAMSIZ}: {too_long}")
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.host_address}/{prefix_len}", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for node in self.nodes:
            ns = self.namespace(node)
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", self.host_veth(node), "type", "veth",
                  "peer", "name", self.node_veth(node), "netns", ns])
            _run(["ip", "link", "set", self.host_veth(node), "master", self.bridge])
            _run(["ip", "link", "set", self.host_veth(node), "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(node)}/{prefix_len}", "dev", self.node_veth(node)])
            _run(["ip", "-n", ns, "link", "set", self.node_veth(node), "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def close(self) -> None:
        """Remove everything (idempotent). Processes still inside the namespaces are killed."""
        if self._closed:
            return
        self._closed = True
        _LIVE.discard(self)
        try:
            if self.subnet is not None:
                remove_prefix(self.prefix)
        finally:
            if self._lock is not None:
                # The lock file itself stays: unlinking it could let two runs hold "the" lock.
                self._lock.close()
                self._lock = None

    def __enter__(self) -> NetworkNamespaces:
        return self.create()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- faults ------------------------------------------------------------------------------

    @property
    def isolated(self) -> frozenset[int]:
        return frozenset(self._isolated)

    def isolate(self, node: int) -> None:
        """Cut the node off from everyone (other nodes and clients), both ways."""
        _run(["ip", "link", "set", self.host_veth(node), "down"])
        self._isolated.add(node)

    def heal(self, node: int) -> None:
        _run(["ip", "link", "set", self.host_veth(node), "up"])
        self._isolated.discard(node)

    def partition(self, side_a: Iterable[int], side_b: Iterable[int]) -> None:
        """Drop IPv4 between every node of ``side_a`` and every node of ``side_b`` (both
        ways); traffic within a side and with the root namespace (clients) still flows.
        Replaces any partition in place."""
        a, b = set(side_a), set(side_b)
        if a & b:
            raise ValueError(f"nodes on both sides: {sorted(a & b)}")
        for node in a | b:
            self._check_node(node)
        self.heal_partition()
        for node in a | b:
            self._drop_to(node, b if node in a else a)

    def heal_partition(self) -> None:
        for node in sorted(self._partitioned):
            _run(["tc", "-n", self.namespace(node), "qdisc", "del", "dev", self.node_veth(node), "root"],
                 check=False)
        self._partitioned.clear()

    def _drop_to(self, node: int, peers: Iterable[int]) -> None:
        # This kernel has no tc drop action (act_gact) and no netem, but HTB and pfifo exist:
        # class 1:1 (default) passes everything, class 1:2 feeds a pfifo of limit 0, which drops
        # every packet it is given; u32 filters send packets for the peers' addresses to 1:2.
        ns, dev = self.namespace(node), self.node_veth(node)
        tc = ["tc", "-n", ns]
        _run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
        self._partitioned.add(node)
        for classid in ("1:1", "1:2"):
            _run([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", classid,
                  "htb", "rate", "10gbit", "quantum", "60000"])
        _run([*tc, "qdisc", "add", "dev", dev, "parent", "1:2", "handle", "20:", "pfifo", "limit", "0"])
        for peer in sorted(peers):
            _run([*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                  "u32", "match", "ip", "dst", f"{self.address(peer)}/32", "flowid", "1:2"])

    def heal_all(self) -> None:
        for node in sorted(self._isolated):
            self.heal(node)
        self.heal_partition()

    def __repr__(self) -> str:
        where = "unclaimed" if self.subnet is None else f"{self.network} prefix {self.prefix}"
        return f"<NetworkNamespaces size={self.size} {where}{' closed' if self._closed else ''}>"
