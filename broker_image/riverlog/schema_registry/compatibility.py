"""Compatibility modes over a subject's versions (Confluent Schema Registry's words and rules).

BACKWARD: a consumer using the new schema can read data written with the previous one.
FORWARD: a consumer using the previous schema can read data written with the new one.
FULL: both. The ``_TRANSITIVE`` forms check against every earlier version, not only the latest.
NONE: no check.
"""

from __future__ import annotations

from collections.abc import Sequence

from .formats import Incompatibility, ParsedSchema

MODES = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_MODE = "BACKWARD"


def _pair_errors(mode: str, new: ParsedSchema, old: ParsedSchema) -> list[Incompatibility]:
    errors: list[Incompatibility] = []
    if mode.startswith(("BACKWARD", "FULL")):
        errors += new.read_errors(old)
    if mode.startswith(("FORWARD", "FULL")):
        errors += old.read_errors(new)
    return errors


def compatibility_errors(mode: str, new: ParsedSchema,
                         earlier: Sequence[tuple[int, ParsedSchema]]) -> list[str]:
    """Messages for each way ``new`` breaks ``mode`` against ``earlier`` (``(version, schema)``
    oldest first, deleted versions left out); empty when compatible. Each message names the
    version it was checked against, as Confluent's verbose answers do."""
    if mode not in MODES:
        raise ValueError(f"unknown compatibility mode {mode!r}")
    if mode == "NONE" or not earlier:
        return []
    against = earlier if mode.endswith("_TRANSITIVE") else earlier[-1:]
    messages: list[str] = []
    for version, old in reversed(against):  # newest first, as Confluent reports them
        if old.schema_type != new.schema_type:
            messages.append(f"Incompatible schema type: {new.schema_type} cannot follow {old.schema_type}; "
                            f"{{oldSchemaVersion: {version}, compatibility: '{mode}'}}")
            continue
        errors = _pair_errors(mode, new, old)
        if errors:
            messages += [str(error) for error in errors]
            messages += [f"{{oldSchemaVersion: {version}}}", f"{{oldSchema: '{old.canonical()}'}}",
                         f"{{compatibility: '{mode}'}}"]
    return messages
