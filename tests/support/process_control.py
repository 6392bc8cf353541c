"""One broker process under the harness's control: started in its own session with its output in
a log file, then frozen, thawed, stopped or killed with POSIX signals.

:class:`support.brokers.BrokerProcess` (a lone broker) and :class:`support.process_cluster.ClusterNode`
(a node of a process cluster) are both :class:`SignalledProcess`; each adds how it is launched and
when it counts as ready.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

STOP_TIMEOUT = 30.0


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid`` (VmRSS), in KiB: how the memory-bound tests watch a
    broker (Riverlog's Python process or Kafka's JVM alike)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class SignalledProcess:
    """A child process, its log file and whether we froze it (``paused``).

    ``starts`` counts launches; each one writes a banner with the command line to the log, which
    is kept across restarts.
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    def _not_running(self) -> Exception:
        """The error :meth:`pause` raises when there is no live process to freeze."""
        return RuntimeError(f"{self!r} is not running")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- signals -----------------------------------------------------------------------------

    def _spawn(self, cmd: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        """Launch ``cmd`` with its output appended to the log, without waiting for it."""
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                # Its own session: a Ctrl-C aimed at pytest does not kill it behind the harness's
                # back, and signals we send reach only this process.
                start_new_session=True,
            )
        self.paused = False

    def terminate(self) -> None:
        """Send SIGTERM (controlled shutdown) without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            if self.paused:
                self.resume()  # a stopped process acts on SIGTERM only once continued
            self.proc.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Wait for the process to exit; SIGKILL after ``timeout``. True if it exited by itself."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            self._note(f"did not exit {timeout:.0f}s after SIGTERM; sending SIGKILL")
            self.kill()
            return False

    def kill(self) -> None:
        """Crash it: SIGKILL, nothing flushed or closed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.paused = False

    def pause(self) -> None:
        """Freeze it (SIGSTOP): its connections stay open, nothing is answered."""
        if self.proc is None or self.proc.poll() is not None:
            raise self._not_running()
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    # --- diagnostics -------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        with open(self.log_path, "a") as log:
            log.write(f"\n===== harness: {message}\n")
