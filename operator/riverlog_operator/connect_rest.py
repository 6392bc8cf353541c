"""Kafka Connect's REST API client, which lives with Riverlog's other clients
(``riverlog.client.connect_rest``) since ``riverlog mirror`` uses it too; the handlers import it
from here."""

from riverlog.client.connect_rest import RETRY_STATUSES, ConnectRest, ConnectRestError, ConnectUnreachable

__all__ = ["RETRY_STATUSES", "ConnectRest", "ConnectRestError", "ConnectUnreachable"]
