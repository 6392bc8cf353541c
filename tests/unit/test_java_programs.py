"""The cache key of the compiled Java test programs (tests/support/java_programs.py): it changes
with the sources and the jars compiled against, and with nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import java_programs
from support.java_programs import JavaPrograms, cache_key, json_lines

pytestmark = pytest.mark.unit

SOURCES = [("TxnClient.java", b"class TxnClient {}"), ("util/Json.java", b"class Json {}")]
JARS = ["kafka-clients-4.3.1.jar", "slf4j-api-2.0.17.jar"]


def test_key_ignores_order() -> None:
    assert cache_key(SOURCES, JARS) == cache_key(list(reversed(SOURCES)), list(reversed(JARS)))


def test_key_follows_source_content_and_names() -> None:
    base = cache_key(SOURCES, JARS)
    edited = [("TxnClient.java", b"class TxnClient { }"), SOURCES[1]]
    renamed = [("TxnClient2.java", SOURCES[0][1]), SOURCES[1]]
    assert len({base, cache_key(edited, JARS), cache_key(renamed, JARS), cache_key(SOURCES[:1], JARS)}) == 4


def test_key_follows_the_jars() -> None:
    other_kafka = ["kafka-clients-4.4.0.jar", "slf4j-api-2.0.17.jar"]
    assert cache_key(SOURCES, JARS) != cache_key(SOURCES, other_kafka)
    assert cache_key(SOURCES, JARS) != cache_key(SOURCES, [*JARS, "kafka-streams-4.3.1.jar"])


def test_key_does_not_confuse_content_with_names() -> None:
    # Lengths are hashed with each source, so moving bytes between two files changes the key.
    a = [("A.java", b"xy"), ("B.java", b"z")]
    b = [("A.java", b"x"), ("B.java", b"yz")]
    assert cache_key(a, JARS) != cache_key(b, JARS)


def test_programs_key_reads_the_tree(tmp_path: Path) -> None:
    sources, libs = tmp_path / "java", tmp_path / "libs"
    sources.mkdir()
    libs.mkdir()
    (sources / "A.java").write_text("class A {}")
    (libs / "kafka-clients-4.3.1.jar").write_bytes(b"")
    programs = JavaPrograms(libs, sources=sources)
    first = programs.key()
    assert first == cache_key([("A.java", b"class A {}")], ["kafka-clients-4.3.1.jar"])
    (sources / "A.java").write_text("class A { int x; }")
    assert programs.key() != first


def test_cache_lives_under_the_riverlog_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RIVERLOG_CACHE", str(tmp_path))
    assert java_programs.cache_dir() == tmp_path / "java"


def test_json_lines_skips_logging() -> None:
    out = 'SLF4J: something\n{"ok": true, "offset": 3}\n\nnot json {\n{"ok": false}\n'
    assert json_lines(out) == [{"ok": True, "offset": 3}, {"ok": False}]
