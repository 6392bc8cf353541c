"""The process-cluster harness itself: a test process that dies without any cleanup (kill -9,
or a crash in a client library) leaves no node running, and the next run removes its
namespaces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.brokers import BROKER_IMAGE, selected_target
from support.netns import NetworkNamespaces, _namespaces

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TESTS = Path(__file__).resolve().parents[1]

DOOMED_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from support.process_cluster import ProcessCluster
    cluster = ProcessCluster(Path(sys.argv[1]), 1, target=sys.argv[2])
    cluster.start()
    print(cluster.node(1).pid, cluster.net.prefix, flush=True)
    time.sleep(600)
""")


def test_a_killed_test_process_leaves_no_node_and_its_namespaces_are_swept(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(BROKER_IMAGE)])}
    doomed = subprocess.Popen([sys.executable, "-c", DOOMED_RUN, str(tmp_path / "doomed"), selected_target()],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert doomed.stdout is not None
        line = doomed.stdout.readline()  # blocks until the one-node cluster is ready
        assert line, f"the cluster did not start:\n{doomed.stderr.read() if doomed.stderr else ''}"
        node_pid, prefix = int(line.split()[0]), line.split()[1]
        assert Path(f"/proc/{node_pid}").exists()
        doomed.send_signal(signal.SIGKILL)  # no atexit, no teardown
        doomed.wait(timeout=30)
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _running(node_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(node_pid), "the node outlived the test process that started it"
    assert f"{prefix}-1" in _namespaces()
    with NetworkNamespaces(1) as net:
        assert not [ns for ns in _namespaces() if ns.startswith(prefix) and ns != net.namespace(1)]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
