"""Test scaffolding shared by the protocol schema test modules (``test_protocol_*_apis.py``).

For every valid version of every request and response:

* round trips of fully populated values, of values with every nullable field null, and of empty
  values (missing keys take the defaults);
* the schema against Kafka's own message JSON as vendored by kafka-python 3.0.12;
* the wire bytes against kafka-python's JSON-driven codec, both ways (their encoder fed the same
  values writes our bytes; their decoder reads our bytes back into the same values);
* the wire bytes against the hand-written legacy classes of aiokafka 0.14 and kafka-python
  (``kafka.protocol.old``), independent of the JSON, for the versions they have.

Each module declares what differs -- its messages, Kafka 4.x's version table for them, the
versions the legacy classes cover -- and binds the shared tests built here to module-level
``test_*`` names, so pytest collects them there with their usual names and parameter ids::

    from support import protocol_crosscheck as crosscheck

    CASES = crosscheck.cases(MESSAGES)
    test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)

(The data-path APIs compare with kafka-python's codec and the legacy classes in their own way, in
``test_protocol_data_apis``, and use only the rest.)

The helpers for values (samples, round trips, spec comparison, kafka-python and legacy value
conversions) are in ``protocol_samples``.
"""

from __future__ import annotations

import importlib
import io
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest
from riverlog.protocol.schema import Message, _in

from support.protocol_samples import (
    has_tagged_values,
    kafka_python_build,
    kafka_python_values,
    legacy_classes,
    legacy_normalize,
    legacy_values,
    legacy_version,
    positional,
    present_only,
    roundtrip,
    sample,
    spec_differences,
    spec_json,
    spec_versions,
)

__all__ = [
    "cases",
    "version_ranges_test",
    "schema_matches_kafka_json_test",
    "roundtrip_populated_test",
    "roundtrip_nulls_test",
    "missing_keys_take_defaults_test",
    "kafka_python_class",
    "kafka_python_json_codec_test",
    "legacy_cases",
    "legacy_cross_check_coverage_test",
    "legacy_codec_test",
]

Test = Callable[..., None]


def _versions(m: Message) -> range:
    return range(m.valid[0], m.valid[1] + 1)


def cases(messages: Iterable[Message]) -> list[Any]:
    """(message, version) parameters for every valid version of every message."""
    return [pytest.param(m, v, id=f"{m.name}-v{v}") for m in messages for v in _versions(m)]


# --- shape ------------------------------------------------------------------------------------


def version_ranges_test(
    modules: Sequence[Any], expected: Mapping[int, tuple[tuple[int, int], tuple[int, int]]]
) -> Test:
    """Each module's request and response have the same API key and the valid and flexible
    versions of ``expected`` (API key -> (valid, flexible))."""

    @pytest.mark.parametrize("mod", modules, ids=lambda mod: mod.__name__.rsplit(".", 1)[-1])
    def test_version_ranges(mod: Any) -> None:
        assert mod.REQUEST.api_key == mod.RESPONSE.api_key
        assert mod.REQUEST.name.endswith("Request") and mod.RESPONSE.name.endswith("Response")
        valid, flexible = expected[mod.REQUEST.api_key]
        for m in (mod.REQUEST, mod.RESPONSE):
            assert (m.valid, m.flexible) == (valid, flexible), m.name

    return test_version_ranges


def schema_matches_kafka_json_test(messages: Sequence[Message], *, unstable_latest: Sequence[Message] = ()) -> Test:
    """Each message against Kafka's JSON: valid versions, then ``spec_differences``.

    ``unstable_latest`` lists requests whose spec marks the latest version unstable; we leave that
    version out, for the request and for its response (which doesn't repeat the flag)."""
    unstable = {m.api_key: m for m in unstable_latest}

    @pytest.mark.parametrize("message", messages, ids=lambda m: m.name)
    def test_schema_matches_kafka_json(message: Message) -> None:
        spec = spec_json(message)
        lo, hi = spec_versions(spec["validVersions"])
        if message.api_key in unstable:
            assert spec_json(unstable[message.api_key]).get("latestVersionUnstable") is True
            hi -= 1
        else:
            assert not spec.get("latestVersionUnstable")
        assert (lo, hi) == message.valid
        assert spec_differences(message) == []

    return test_schema_matches_kafka_json


# --- round trips ------------------------------------------------------------------------------


def roundtrip_populated_test(cases: Sequence[Any]) -> Test:
    @pytest.mark.parametrize(("message", "version"), cases)
    def test_roundtrip_populated(message: Message, version: int) -> None:
        value = sample(message, version)
        assert roundtrip(message, version, value) == value

    return test_roundtrip_populated


def roundtrip_nulls_test(cases: Sequence[Any]) -> Test:
    @pytest.mark.parametrize(("message", "version"), cases)
    def test_roundtrip_nulls(message: Message, version: int) -> None:
        value = sample(message, version, nulls=True)
        assert roundtrip(message, version, value) == value

    return test_roundtrip_nulls


def missing_keys_take_defaults_test(cases: Sequence[Any]) -> Test:
    @pytest.mark.parametrize(("message", "version"), cases)
    def test_missing_keys_take_defaults(message: Message, version: int) -> None:
        decoded = roundtrip(message, version, {})
        flexible = message.is_flexible(version)
        for fld in message.body.fields:
            nullable_now = fld.tag is None and _in(fld.versions, version) and _in(fld.nullable, version)
            # A missing nullable field is sent as null; anything else takes its default.
            expected = None if nullable_now else fld.default_value()
            assert decoded[fld.name] == expected, (fld.name, flexible)

    return test_missing_keys_take_defaults


# --- against kafka-python's JSON-driven codec -------------------------------------------------


def kafka_python_class(message: Message, module_names: Sequence[str]) -> Any:
    """kafka-python's JSON-driven class named like ``message``, from the first of
    ``module_names`` that has it (imported lazily)."""
    for name in module_names:
        cls = getattr(importlib.import_module(name), message.name, None)
        if cls is not None:
            assert message.api_key == cls.API_KEY
            return cls
    raise AssertionError(f"kafka-python has no {message.name}")


def kafka_python_json_codec_test(cases: Sequence[Any], module_names: Sequence[str]) -> Test:
    """Both ways against kafka-python's class for each message, looked up in ``module_names``."""

    @pytest.mark.parametrize("nulls", [False, True], ids=["populated", "nulls"])
    @pytest.mark.parametrize(("message", "version"), cases)
    def test_kafka_python_json_codec_agrees(message: Message, version: int, nulls: bool) -> None:
        kp = kafka_python_class(message, module_names)
        value = sample(message, version, nulls=nulls)
        ours = message.encode(value, version)
        # Their encoder, fed the same values field by field, writes the same bytes...
        assert bytes(kafka_python_build(kp, version, value).encode(version=version)) == ours
        # ...and their decoder reads ours back into the same values.
        theirs = kp.decode(ours, version=version)
        assert kafka_python_values(theirs) == present_only(message, version, value)

    return test_kafka_python_json_codec_agrees


# --- against the hand-written legacy classes of aiokafka and kafka-python ----------------------


def legacy_cases(
    messages: Sequence[Message],
    *,
    skip_tagged: bool = False,
    marks: Callable[[str, int], list[Any]] = lambda label, version: [],
) -> list[Any]:
    """(legacy class, message, version) parameters for every legacy class of one of ``messages``
    at a version the message has. ``skip_tagged`` leaves out versions carrying tagged fields;
    ``marks(label, version)`` gives a case's marks."""
    by_key = {(m.api_key, m.name.endswith("Request")): m for m in messages}
    out = []
    # kafka-python 3.0.12 loads its JSON with importlib.resources' deprecated functions.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
        classes = legacy_classes()
    for label, cls in classes:
        m = by_key.get((cls.API_KEY, "Request" in label.rsplit(".", 1)[-1]))
        version = legacy_version(label)
        if m is None or not m.supports(version):
            continue
        if skip_tagged and has_tagged_values(m, version):
            continue
        out.append(pytest.param(cls, m, version, id=label, marks=marks(label, version)))
    return out


def legacy_cross_check_coverage_test(cases: Sequence[Any], coverage: Mapping[str, range]) -> Test:
    """The legacy cases cover, for each API of ``coverage``, the request and the response at each
    of its versions."""

    def test_legacy_cross_check_coverage() -> None:
        covered = {(m.name, v) for _, m, v in (c.values for c in cases)}
        for api, versions in coverage.items():
            for v in versions:
                for kind in ("Request", "Response"):
                    assert (api + kind, v) in covered, (api + kind, v)

    return test_legacy_cross_check_coverage


def legacy_codec_test(cases: Sequence[Any]) -> Test:
    @pytest.mark.parametrize(("legacy", "message", "version"), cases)
    def test_legacy_codec_agrees(legacy: Any, message: Message, version: int) -> None:
        assert not has_tagged_values(message, version)  # the legacy classes can't write them
        for nulls in (False, True):
            value = sample(message, version, nulls=nulls)
            ours = message.encode(value, version)
            theirs = legacy_values(legacy.SCHEMA, positional(message, version, value))
            # Their encoder on the same values gives the same bytes...
            assert bytes(legacy.SCHEMA.encode(theirs)) == ours
            # ...and their decoder reads all of ours back into the same values.
            buf = io.BytesIO(ours)
            decoded = legacy.SCHEMA.decode(buf)
            assert buf.read() == b""
            assert legacy_normalize(decoded) == legacy_normalize(theirs)

    return test_legacy_codec_agrees
