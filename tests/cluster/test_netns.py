"""The network-namespace helper with plain sockets: nodes reach each other and the clients, not
the outside; isolation and partitions cut exactly the links they should, both ways; healing
restores them; cleanup (also of a crashed run's leftovers) leaves nothing behind."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.netns import NetworkNamespaces, _links, _namespaces

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

PORT = 7100
PROBE_TIMEOUT = 1.5

# Each node runs this: answer every line with "<node>:<line>" on its address, forever.
SERVER = textwrap.dedent("""
    import socket, sys, threading
    node, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    def serve(conn):
        with conn, conn.makefile("rwb") as f:
            for line in f:
                f.write(node.encode() + b":" + line)
                f.flush()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((address, port))
    srv.listen()
    print("listening", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
""")

# One connection attempt from inside a namespace; prints "ok <answer>" or "fail <error>".
PROBE = textwrap.dedent("""
    import socket, sys
    address, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            s.sendall(b"ping\\n")
            print("ok", s.makefile("rb").readline().decode().strip())
    except OSError as exc:
        print("fail", type(exc).__name__, exc)
""")


def probe_from_root(address: str) -> str:
    try:
        with socket.create_connection((address, PORT), timeout=PROBE_TIMEOUT) as sock:
            sock.sendall(b"ping\n")
            return "ok " + sock.makefile("rb").readline().decode().strip()
    except OSError as exc:
        return f"fail {type(exc).__name__} {exc}"


def probe_from(net: NetworkNamespaces, node: int, address: str) -> str:
    out = subprocess.run(
        [*net.command_prefix(node), sys.executable, "-c", PROBE, address, str(PORT), str(PROBE_TIMEOUT)],
        capture_output=True, text=True, timeout=30,
    )
    return out.stdout.strip() or f"fail (no output) {out.stderr.strip()}"


def reaches(result: str, node: int) -> bool:
    return result == f"ok {node}:ping"


@pytest.fixture
def net() -> Iterator[NetworkNamespaces]:
    with NetworkNamespaces(3) as net:
        servers = [
            subprocess.Popen([*net.command_prefix(n), sys.executable, "-c", SERVER, str(n), net.address(n), str(PORT)],
                             stdout=subprocess.PIPE, text=True)
            for n in net.nodes
        ]
        try:
            for server in servers:
                assert server.stdout is not None
                assert server.stdout.readline().strip() == "listening"
            yield net
        finally:
            for server in servers:
                server.kill()
                server.wait(timeout=10)


def test_nodes_reach_each_other_and_the_clients_but_nothing_outside(net: NetworkNamespaces) -> None:
    for n in net.nodes:
        assert reaches(probe_from_root(net.address(n)), n)
    for a in net.nodes:
        for b in net.nodes:
            assert reaches(probe_from(net, a, net.address(b)), b), (a, b)
    # Only the /24 is routed inside a namespace: any other address is unreachable at once.
    outside = probe_from(net, 1, "10.214.0.1")
    assert outside.startswith("fail") and "unreachable" in outside, outside
    routes = subprocess.run(["ip", "-n", net.namespace(1), "-4", "route", "show"],
                            capture_output=True, text=True, check=True).stdout
    assert "default" not in routes and str(net.network) in routes, routes


def test_isolation_cuts_a_node_off_both_ways_until_healed(net: NetworkNamespaces) -> None:
    # A connection established before the cut: with silent drops it survives and resumes.
    established = socket.create_connection((net.address(2), PORT), timeout=PROBE_TIMEOUT)
    established.settimeout(30)
    reader = established.makefile("rb")
    try:
        net.isolate(2)
        assert net.isolated == {2}
        assert probe_from_root(net.address(2)).startswith("fail")
        assert probe_from(net, 1, net.address(2)).startswith("fail")
        assert probe_from(net, 3, net.address(2)).startswith("fail")
        assert probe_from(net, 2, net.address(1)).startswith("fail")
        assert probe_from(net, 2, net.host_address).startswith("fail")
        # The others are unaffected.
        assert reaches(probe_from(net, 1, net.address(3)), 3)
        assert reaches(probe_from_root(net.address(1)), 1)
        # Sent during the cut: retransmitted by TCP after healing, then answered.
        established.sendall(b"during\n")
        time.sleep(0.5)
        net.heal(2)
        assert net.isolated == set()
        assert reader.readline() == b"2:during\n"
    finally:
        reader.close()
        established.close()
    assert reaches(probe_from_root(net.address(2)), 2)
    assert reaches(probe_from(net, 1, net.address(2)), 2)
    assert reaches(probe_from(net, 2, net.address(3)), 3)


def test_partition_separates_node_groups_but_not_clients(net: NetworkNamespaces) -> None:
    net.partition({1}, {2, 3})
    assert probe_from(net, 1, net.address(2)).startswith("fail")
    assert probe_from(net, 1, net.address(3)).startswith("fail")
    assert probe_from(net, 3, net.address(1)).startswith("fail")
    assert reaches(probe_from(net, 2, net.address(3)), 3)
    assert reaches(probe_from(net, 3, net.address(2)), 2)
    for n in net.nodes:
        assert reaches(probe_from_root(net.address(n)), n)
    net.heal_partition()
    assert reaches(probe_from(net, 1, net.address(2)), 2)
    assert reaches(probe_from(net, 3, net.address(1)), 1)


def test_parallel_instances_get_separate_subnets_and_close_removes_everything() -> None:
    with NetworkNamespaces(2) as first, NetworkNamespaces(2) as second:
        assert first.subnet != second.subnet and first.prefix != second.prefix
        prefixes = (first.prefix, second.prefix)
        assert {f"{p}-{n}" for p in prefixes for n in (1, 2)} <= set(_namespaces())
    assert not [ns for ns in _namespaces() if ns.startswith(prefixes)]
    assert not [link for link in _links() if link.startswith(prefixes)]
    first.close()  # idempotent


CRASHING_RUN = textwrap.dedent("""
    import os, subprocess, sys
    from support.netns import NetworkNamespaces
    net = NetworkNamespaces(2, subnet=int(sys.argv[1])).create()
    sleeper = subprocess.Popen([*net.command_prefix(1), "sleep", "600"], start_new_session=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(sleeper.pid, flush=True)
    os._exit(0)  # no atexit, no cleanup: as if the test run had been killed
""")


def test_leftovers_of_a_crashed_run_are_removed_by_the_next_run() -> None:
    with NetworkNamespaces(1) as probe:
        subnet, prefix = probe.subnet, probe.prefix
    assert subnet is not None
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUN, str(subnet)], capture_output=True, text=True,
                             timeout=60, cwd=Path(__file__).parents[1])
    assert crashed.returncode == 0, crashed.stderr
    orphan = int(crashed.stdout.split()[0])
    assert f"{prefix}-1" in _namespaces()
    assert _state(orphan) not in (None, "Z")
    # The next run sweeps every unlocked prefix, whichever subnet it claims itself.
    with NetworkNamespaces(1) as net:
        assert _gone(orphan), "the crashed run's process in its namespace was not killed"
        own = {net.namespace(1), net.bridge, net.host_veth(1)}
        assert not [n for n in [*_namespaces(), *_links()] if n.startswith(prefix) and n not in own]
    # Claiming the crashed run's subnet explicitly works too.
    with NetworkNamespaces(3, subnet=subnet) as net:
        assert sorted(ns for ns in _namespaces() if ns.startswith(prefix)) == [f"{prefix}-{n}" for n in (1, 2, 3)]
        assert net.address(3).endswith(".13")
    assert not [ns for ns in _namespaces() if ns.startswith(prefix)]
    assert not [link for link in _links() if link.startswith(prefix)]


def _state(pid: int) -> str | None:
    """The process state letter from /proc, None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _gone(pid: int, timeout: float = 10.0) -> bool:
    # The orphan is not our child (its parent exited): init reaps it once it is killed, and a
    # SIGKILL takes effect asynchronously, so wait for it to be a zombie or gone.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(pid) in (None, "Z"):
            return True
        time.sleep(0.05)
    return False
