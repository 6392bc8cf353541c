"""The few calls of a Confluent-compatible schema registry's REST API that riverlog-spark makes:
register the generator's schema, and read a subject's versions for the ETL's decoding.

Plain urllib, so the driver needs no HTTP library beyond Python's; failures become
:class:`RegistryClientError` with a sentence fit for the command line (the CLI prints it and
exits), never a traceback.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

# Where --schema-registry's default comes from, for generate and for the pipelines alike.
URL_ENV = "RIVERLOG_SCHEMA_REGISTRY_URL"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_TIMEOUT_S = 30.0
# Confluent's error code the messages below single out.
SUBJECT_NOT_FOUND = 40401


class RegistryClientError(RuntimeError):
    """The registry could not be reached, or refused; the message says which and why.
    ``error_code`` is Confluent's code of a refusal (None: no answer at all)."""

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code


def default_url() -> str | None:
    return os.environ.get(URL_ENV) or None


def topic_subject(topic: str) -> str:
    """TopicNameStrategy, the serializers' default: values of ``topic`` under ``<topic>-value``."""
    return f"{topic}-value"


@dataclass(frozen=True)
class SubjectVersion:
    version: int
    schema_id: int
    schema_type: str  # AVRO, PROTOBUF or JSON
    schema: str
    has_references: bool


def _request(base_url: str, method: str, path: str, body: object = None) -> Any:
    url = base_url.rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise _refusal(base_url, method, path, exc) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RegistryClientError(f"schema registry {base_url} unreachable: {reason}") from None


def _refusal(base_url: str, method: str, path: str, exc: urllib.error.HTTPError) -> RegistryClientError:
    try:
        body = json.loads(exc.read())
        code, message = int(body.get("error_code", exc.code)), str(body.get("message", ""))
    except (ValueError, AttributeError):
        code, message = exc.code, exc.reason
    return RegistryClientError(f"schema registry {base_url}: {method} {path} answered {exc.code} "
                               f"(error code {code}): {message}", code)


def _quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def register(base_url: str, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    """Register ``schema`` under ``subject`` (or find it there): its global id."""
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    answer = _request(base_url, "POST", f"/subjects/{_quoted(subject)}/versions", body)
    return int(answer["id"])


def subject_versions(base_url: str, subject: str) -> list[SubjectVersion]:
    """Every version of ``subject``, oldest first, soft-deleted ones included: records written
    with a version deleted later are still in the topic and still need their writer schema."""
    try:
        numbers = _request(base_url, "GET", f"/subjects/{_quoted(subject)}/versions?deleted=true")
    except RegistryClientError as exc:
        if exc.error_code == SUBJECT_NOT_FOUND:
            raise RegistryClientError(f"schema registry {base_url}: no subject {subject!r} "
                                      "(nothing was registered for it)") from None
        raise
    out = []
    for number in sorted(int(n) for n in numbers):
        answer = _request(base_url, "GET", f"/subjects/{_quoted(subject)}/versions/{number}?deleted=true")
        out.append(SubjectVersion(version=number, schema_id=int(answer["id"]),
                                  schema_type=str(answer.get("schemaType", "AVRO")), schema=str(answer["schema"]),
                                  has_references=bool(answer.get("references"))))
    return out


def latest_version(base_url: str, subject: str) -> int:
    """The subject's latest version that is not soft-deleted: the one new data is written with."""
    answer = _request(base_url, "GET", f"/subjects/{_quoted(subject)}/versions/latest")
    return int(answer["version"])
