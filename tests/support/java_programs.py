"""Java test programs of ``tests/java/``, compiled against Kafka's jars and run like Kafka's tools.

Some acceptance tests need the Java client itself (kafka-clients, Kafka Streams) driven in ways
no command-line tool offers: a transactional producer scripted step by step, a
consume-transform-produce loop, a Streams application. Those programs live as plain ``.java``
files in ``tests/java/`` and are compiled here with the JDK's ``javac`` against the jars
``bench/kafka_dist.py`` installs (``bench/kafka-pom.xml`` lists kafka-streams, so Streams and
RocksDB are among them), so they always speak the Kafka version the broker tests compare with.

Compiling takes a few seconds of CPU, so the classes are cached outside the repository in
``~/.cache/riverlog/java/<key>/`` (``RIVERLOG_CACHE`` moves ``~/.cache/riverlog``), where the key
hashes the sources and the names of the jars compiled against: editing a program or changing
the Kafka version compiles again, anything else reuses the cache. Within one test session the
first caller compiles and later ones reuse the result.

Two ways to run a program:

- :meth:`JavaPrograms.run`: one-shot, like :class:`support.java_tools.JavaTools`;
- :meth:`JavaPrograms.session`: a long-lived process scripted line by line over stdin, which
  answers each command with one JSON line on stdout (:class:`JavaSession`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from support.brokers import REPO_ROOT, kafka_dist
from support.java_tools import ToolResult, run_java

JAVA_SOURCES = REPO_ROOT / "tests" / "java"
# Bump when the way classes are compiled changes (javac flags), so old caches are not trusted.
COMPILE_FORMAT = "1"
_COMPLETE_MARKER = ".complete"

# Compiled class directories of this process, by cache key: compile once per test session.
_COMPILED: dict[str, Path] = {}
_COMPILE_LOCK = threading.Lock()


class JavaProgramError(RuntimeError):
    """Compiling or talking to a Java test program failed; the message says why."""


def _progress(message: str) -> None:
    # Progress goes to stderr so that pytest's -s shows it and captured output keeps it.
    print(f"[java-programs] {message}", file=sys.stderr, flush=True)


def source_files(sources: Path = JAVA_SOURCES) -> list[Path]:
    return sorted(sources.rglob("*.java"))


def jar_files(libs: Path) -> list[Path]:
    return sorted(Path(libs).glob("*.jar"))


def cache_key(sources: Iterable[tuple[str, bytes]], jars: Iterable[str]) -> str:
    """Hash of the sources (relative path and content) and of the jar names compiled against.

    Order does not matter (both are sorted); the jar names carry their versions, so another
    Kafka release gives another key without hashing megabytes of jars.
    """
    digest = hashlib.sha256()
    digest.update(f"format {COMPILE_FORMAT}\n".encode())
    for name, content in sorted(sources):
        digest.update(f"source {name} {len(content)}\n".encode())
        digest.update(content)
    for jar in sorted(jars):
        digest.update(f"jar {jar}\n".encode())
    return digest.hexdigest()[:20]


def cache_dir() -> Path:
    return Path(kafka_dist.cache_root()) / "java"


def javac_executable() -> str:
    java = Path(kafka_dist.java_executable())
    beside = java.with_name("javac")
    if beside.exists():
        return str(beside)
    found = shutil.which("javac")
    if found is None:
        raise JavaProgramError("'javac' is not on PATH (the JDK, not only a JRE, is needed)")
    return found


class JavaPrograms:
    """The programs of ``tests/java/`` compiled against the jars in ``libs``."""

    def __init__(self, libs: Path, *, sources: Path = JAVA_SOURCES, heap: str = "256m") -> None:
        self.libs = Path(libs)
        self.sources = Path(sources)
        self.heap = heap

    def key(self) -> str:
        files = source_files(self.sources)
        if not files:
            raise JavaProgramError(f"no .java files under {self.sources}")
        return cache_key(
            ((str(f.relative_to(self.sources)), f.read_bytes()) for f in files),
            (j.name for j in jar_files(self.libs)),
        )

    def classes(self) -> Path:
        """The directory of compiled classes, compiling first if the cache has none."""
        key = self.key()
        with _COMPILE_LOCK:
            if key in _COMPILED:
                return _COMPILED[key]
            target = cache_dir() / key
            if not (target / _COMPLETE_MARKER).is_file():
                # Two pytest processes may compile at once; the second waits and then finds the classes.
                with kafka_dist.file_lock(cache_dir() / ".lock"):
                    if not (target / _COMPLETE_MARKER).is_file():
                        self._compile(target)
            else:
                _progress(f"using cached classes {target}")
            _COMPILED[key] = target
            return target

    def _compile(self, target: Path) -> None:
        files = source_files(self.sources)
        _progress(f"compiling {len(files)} Java source(s) from {self.sources} against {self.libs}")
        started = time.monotonic()
        target.parent.mkdir(parents=True, exist_ok=True)
        # Compile into a sibling and rename, so an interrupted compile never leaves a directory
        # that later runs would trust.
        staging = Path(tempfile.mkdtemp(prefix="classes-", dir=target.parent))
        try:
            cmd = [
                javac_executable(), "-encoding", "UTF-8", "-Xlint:deprecation", "-nowarn",
                "--release", "17", "-cp", kafka_dist.classpath(self.libs), "-d", str(staging),
                *map(str, files),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise JavaProgramError(
                    f"javac failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
                )
            (staging / _COMPLETE_MARKER).write_text(self.key() + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        _progress(f"compiled into {target} in {time.monotonic() - started:.1f}s")

    def command(self, main_class: str, args: Sequence[str] = ()) -> list[str]:
        classes = self.classes()
        cmd = list(kafka_dist.java_command(self.libs, main_class, list(args), heap=self.heap))
        # Our classes first on the class path, then Kafka's jars.
        at = cmd.index("-cp") + 1
        cmd[at] = f"{classes}:{cmd[at]}"
        return cmd

    def run(
        self,
        main_class: str,
        args: Sequence[str] = (),
        *,
        stdin: str | None = None,
        timeout: float = 120.0,
        check: bool = True,
    ) -> ToolResult:
        return run_java(self.command(main_class, args), main_class, stdin=stdin, timeout=timeout, check=check)

    def session(self, main_class: str, args: Sequence[str] = (), *, log_path: Path) -> JavaSession:
        return JavaSession(self.command(main_class, args), log_path=log_path)


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects a program printed, one per line; other lines are ignored."""
    out: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


class JavaSession:
    """A Java program scripted over stdin: each :meth:`call` writes one command line and returns
    the JSON object of the program's next output line. stderr (the client's logging) goes to
    ``log_path``, whose tail is part of every failure message."""

    def __init__(self, cmd: list[str], *, log_path: Path) -> None:
        self.cmd = cmd
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.transcript: list[str] = []

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def _fail(self, what: str) -> AssertionError:
        return AssertionError(
            f"{what}\ncommand: {' '.join(self.cmd)}\n--- transcript ---\n" + "\n".join(self.transcript[-30:])
            + f"\n--- stderr tail ({self.log_path}) ---\n{self.log_tail()}"
        )

    def next_json(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"no answer within {timeout:.0f}s")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise self._fail(f"the program exited (code {self.proc.wait(10)})")
            self.transcript.append("< " + line.rstrip())
            if line.lstrip().startswith("{"):
                try:
                    answer: dict[str, Any] = json.loads(line)
                except ValueError:
                    continue
                return answer

    def call(self, *words: object, timeout: float = 120.0, expect_ok: bool = True) -> dict[str, Any]:
        """Send one command; return its answer. With ``expect_ok`` an answer with
        ``"ok": false`` fails the test with the transcript."""
        line = " ".join(str(w) for w in words)
        if self.proc.poll() is not None or self.proc.stdin is None:
            raise self._fail(f"cannot send {line!r}: the program is not running")
        self.transcript.append("> " + line)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.next_json(timeout)
        if expect_ok and not answer.get("ok", False):
            raise self._fail(f"{line!r} failed: {answer}")
        return answer

    def close(self, timeout: float = 30.0) -> int | None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the program exits at the end of its input
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> JavaSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
