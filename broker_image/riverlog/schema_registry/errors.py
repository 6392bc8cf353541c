"""The REST API's errors: an HTTP status and Confluent's ``error_code``, with its message wording.

Clients branch on ``error_code`` (confluent-kafka's serializers, for one, treat 40401/40403 as
"not registered yet"), so the codes are Confluent's exactly; the messages follow Confluent's.
"""

from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def unauthorized(challenge: str) -> RegistryError:
    """No credentials or wrong ones: Jetty's 401 with the challenge, in Confluent's error body."""
    error = RegistryError(401, 401, "Unauthorized")
    error.headers["WWW-Authenticate"] = challenge
    return error


def forbidden() -> RegistryError:
    """A known user whose roles are not among ``authentication.roles``."""
    return RegistryError(403, 403, "Forbidden")


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405,
                         f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted."
                                     "Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first "
                                     "before being permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed "
                                     "values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level {level!r}. Valid values are none, backward, "
                                     "forward, full, backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, "
                                     "READONLY_OVERRIDE and IMPORT")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def unprocessable(message: str) -> RegistryError:
    """A request body that is not JSON or not of the endpoint's shape (Confluent: 422, code 422)."""
    return RegistryError(422, 422, message)


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    details = "[" + ", ".join(messages) + "]"
    return RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                                   f"\"{subject}\", details: {details}")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {message}")


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {message}")


def forwarding_error(message: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {message}")


def unknown_leader() -> RegistryError:
    return RegistryError(500, 50004, "Unknown leader: no registry instance is the writer right now; retry shortly")
