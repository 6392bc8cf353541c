"""Runs inside a container's private mount namespace (started by ``unshare -m``): bind-mounts the
pod's volume directories and hosts file, then replaces itself with the container's process.

Standalone (stdlib only, run by file path) so the container's environment needs no PYTHONPATH.
Usage: ``launch.py SPEC.json`` with ``{"mounts": [[source, target, read_only]], "argv": [...],
"env": {...}, "cwd": "/"}``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    keep = [os.path.realpath(k) for k in spec.get("keep", [])]
    for source, target, read_only in spec["mounts"]:
        real = os.path.realpath(target)
        if any(k == real or k.startswith(real.rstrip("/") + "/") for k in keep):
            # Mounting here would hide the Python environment or this pod's files (e.g. an
            # emptyDir on /tmp when the venv is under /tmp): the container sees the host's directory.
            continue
        # mountPaths are absolute paths of the container's image; here they land on this
        # machine's tree, so a missing directory (or file, for the hosts file) is created first.
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount("--bind", source, target)
        if read_only:
            _mount("-o", "remount,bind,ro", target)
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])  # own UTS namespace (unshare --uts)
    os.chdir(spec.get("cwd") or "/")
    argv = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
