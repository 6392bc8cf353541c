"""Entrypoint of a broker pod: per-pod properties from the pod's identity, then the broker.

A StatefulSet gives every pod the same template, so the shared server.properties cannot hold
``node.id`` and friends. This derives them:

- ``node.id`` is the pod's ordinal (``<cluster>-3`` is node 3);
- voters (their id is in ``controller.quorum.voters``) get ``process.roles=broker,controller``
  and the CONTROLLER listener on their voter port; the others are brokers (observers);
- ``advertised.listeners`` name the pod's stable DNS name under the headless Service;
- ``broker.rack`` comes from the ``riverlog.dev/rack`` annotation the operator copies from the
  node's topology label, read from a downward API file (waited for, bounded);
- in a secured cluster, ``ssl.keystore.location`` is the pod's own key and certificate,
  ``<RIVERLOG_K8S_CERTS_DIR>/<pod>.pem`` in the Secret the operator keeps (issue #18).

Then it replaces itself with ``python -m riverlog broker`` (exec: the broker gets SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from riverlog.config import parse_listeners, parse_properties, parse_voters

RACK_ANNOTATION = "riverlog.dev/rack"
RACK_WAIT_SECONDS = 300.0


class EntrypointError(Exception):
    pass


def ordinal_of(pod_name: str) -> int:
    match = re.fullmatch(r".+-(\d+)", pod_name)
    if not match:
        raise EntrypointError(f"pod name {pod_name!r} has no StatefulSet ordinal")
    return int(match.group(1))


def rack_from_annotations(text: str) -> str | None:
    """The rack from a downward API annotations file (``key="value"`` lines, Go-quoted)."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key == RACK_ANNOTATION and len(value) >= 2 and value[0] == value[-1] == '"':
            return value[1:-1].encode().decode("unicode_escape")
    return None


def per_pod_properties(shared: Mapping[str, str], pod_name: str, namespace: str, headless_service: str,
                       rack: str | None, certs_dir: str | None = None) -> dict[str, str]:
    node_id = ordinal_of(pod_name)
    voters = {v.node_id: v for v in parse_voters(shared.get("controller.quorum.voters", ""))}
    client_listeners = parse_listeners(shared.get("listeners", ""))
    host = f"{pod_name}.{headless_service}.{namespace}.svc"
    props = {
        "node.id": str(node_id),
        "advertised.listeners": ",".join(f"{lst.name}://{host}:{lst.port}" for lst in client_listeners),
    }
    if node_id in voters:
        props["process.roles"] = "broker,controller"
        props["listeners"] = shared.get("listeners", "") + f",CONTROLLER://:{voters[node_id].port}"
    else:
        props["process.roles"] = "broker"
    if rack:
        props["broker.rack"] = rack
    if certs_dir:
        props["ssl.keystore.location"] = f"{certs_dir}/{pod_name}.pem"
    return props


def broker_argv(config_file: str, props: Mapping[str, str]) -> list[str]:
    argv = [sys.executable, "-m", "riverlog", "broker", "--config", config_file]
    for key in sorted(props):
        argv += ["--set", f"{key}={props[key]}"]
    return argv


def wait_for_rack(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        if path.exists():
            rack = rack_from_annotations(path.read_text())
            if rack:
                return rack
        if time.monotonic() > deadline:
            raise EntrypointError(f"no {RACK_ANNOTATION} annotation after {timeout:.0f}s: is the operator running?")
        time.sleep(1.0)


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start a Riverlog broker in a StatefulSet pod.")
    parser.add_argument("--config", required=True, help="the shared server.properties")
    parser.add_argument("--dry-run", action="store_true", help="print the broker command instead of running it")
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    try:
        rack = None
        if env.get("RIVERLOG_K8S_RACK_FILE"):
            rack = wait_for_rack(Path(env["RIVERLOG_K8S_RACK_FILE"]), RACK_WAIT_SECONDS)
        shared = parse_properties(Path(args.config).read_text())
        props = per_pod_properties(shared, env["POD_NAME"], env["POD_NAMESPACE"],
                                   env["RIVERLOG_K8S_HEADLESS_SERVICE"], rack, env.get("RIVERLOG_K8S_CERTS_DIR"))
    except (EntrypointError, KeyError, OSError, ValueError) as exc:
        print(f"riverlog-k8s-broker: {exc}", file=sys.stderr)
        return 2
    command = broker_argv(args.config, props)
    if args.dry_run:
        print(" ".join(command))
        return 0
    os.execv(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
