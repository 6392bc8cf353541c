"""Client quotas of one user: DescribeClientQuotas and AlterClientQuotas for the ``user``
entity, as ``kafka-configs --entity-type users --entity-name NAME`` reads and writes them."""

from __future__ import annotations

from collections.abc import Mapping

from ..protocol.api_keys import ApiKey
from .admin import AdminClient
from .errors import check_error

MATCH_EXACT = 0


async def describe_user_quotas(admin: AdminClient, user: str) -> dict[str, float]:
    """The quota values set for exactly this user (not its client ids, not the defaults)."""
    conn = await admin.cluster.any_connection()
    response = await conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {
        "components": [{"entity_type": "user", "match_type": MATCH_EXACT, "match": user}], "strict": True})
    check_error(response["error_code"], f"describe the quotas of user '{user}'", response.get("error_message"))
    return {v["key"]: float(v["value"]) for entry in response["entries"] or [] for v in entry["values"]}


async def alter_user_quotas(admin: AdminClient, user: str, changes: Mapping[str, float | None]) -> None:
    """Set (a value) or remove (None) the user's quota keys, all at once."""
    if not changes:
        return
    conn = await admin.cluster.any_connection()
    ops = [{"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}
           for key, value in sorted(changes.items())]
    response = await conn.request(ApiKey.ALTER_CLIENT_QUOTAS, {
        "entries": [{"entity": [{"entity_type": "user", "entity_name": user}], "ops": ops}], "validate_only": False})
    for entry in response["entries"]:
        check_error(entry["error_code"], f"alter the quotas of user '{user}'", entry.get("error_message"))
