"""What every schema format gives the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass


class SchemaError(ValueError):
    """The schema text is not a valid schema of its type (the REST API answers 422, error code
    42201, with this message)."""


@dataclass(frozen=True)
class Incompatibility:
    """One reason a reader schema cannot read what a writer schema wrote.

    ``kind`` is a short upper-case name of the rule broken (e.g. ``READER_FIELD_MISSING_DEFAULT_VALUE``,
    ``FIELD_NUMBER_CHANGED``), ``path`` where in the schema (a JSON pointer for Avro and JSON Schema,
    a message/field path for Protobuf), ``message`` a sentence a person understands.
    """

    kind: str
    path: str
    message: str

    def __str__(self) -> str:
        # Confluent's verbose compatibility messages look like this.
        return f"{{errorType:'{self.kind}', description:'{self.message}', additionalInfo:'{self.path}'}}"


class ParsedSchema(ABC):
    """A parsed schema of one type. Immutable; built by ``formats.parse_schema``."""

    #: "AVRO", "PROTOBUF" or "JSON", the REST API's ``schemaType`` words.
    schema_type: str

    @abstractmethod
    def canonical(self) -> str:
        """The schema as the registry stores and returns it and compares for lookups: the text
        reformatted in one way (whitespace and key order of the input do not matter) but with
        its meaning and names as given."""

    @abstractmethod
    def normalized(self) -> str:
        """``normalize=true``: a form in which schemas that mean the same are equal (e.g. Avro's
        Parsing Canonical Form plus defaults and aliases; Protobuf with options and fields
        ordered; JSON Schema with sorted keys), used to find an existing id for a new text."""

    @abstractmethod
    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        """Why data written with ``writer`` cannot be read with this schema as the reader, in
        this format's rules; empty when it can. BACKWARD checks ``new.read_errors(old)``,
        FORWARD ``old.read_errors(new)``, FULL both."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParsedSchema) and (self.schema_type, self.canonical()) == (
            other.schema_type, other.canonical())

    def __hash__(self) -> int:
        return hash((self.schema_type, self.canonical()))


# References: the name a schema uses for another (Avro: a full type name; Protobuf: the import
# path, e.g. "common/money.proto"; JSON Schema: the $ref URL) -> that schema's text, already
# resolved by the registry (nested references included, in dependency order).
References = Mapping[str, str]
