"""Which client quota applies to a request, and which clients share its rate.

Kafka's default quota callback looks a (user, client id) pair up in this order and takes the
first entity that has the quota key set (``<default>`` is the entity of that type with a null
name):

1. user and client id, 2. user and default client id, 3. user,
4. default user and client id, 5. default user and default client id, 6. default user,
7. client id, 8. default client id.

The entity found also decides the sensor the bytes are counted in, by Kafka's metric tags: an
entity with a user counts per user (its actual name, even under the default user), one with a
client id per client id, so every connection of ``alice`` shares the rate of a user-level quota
while a ``<default>`` client-id quota gives each client id a rate of its own. Without a quota,
connections count per client id (for the metrics).

Pure; entities are sorted (type, name) pairs as in the metadata image.
"""

from __future__ import annotations

from collections.abc import Mapping

USER = "user"
CLIENT_ID = "client-id"

Entity = tuple[tuple[str, str | None], ...]
# The metric tags of a sensor: (user or "", client id or "").
Tags = tuple[str, str]


def _candidates(user: str, client_id: str) -> list[tuple[Entity, Tags]]:
    if not client_id:  # Kafka looks up user quotas only for a request without a client id
        return [(((USER, user),), (user, "")), (((USER, None),), (user, ""))]
    both = (user, client_id)
    return [
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


def resolve(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
            ) -> tuple[float | None, Tags]:
    """The bound of ``key`` for this user and client id (None: unlimited) and the tags of the
    sensor its rate is counted in."""
    for entity, tags in _candidates(user, client_id):
        bound = quotas.get(entity, {}).get(key)
        if bound is not None:
            return bound, tags
    return None, ("", client_id)


def bound_for_tags(quotas: Mapping[Entity, Mapping[str, float]], key: str, tags: Tags) -> float | None:
    """The bound of an existing sensor after the quotas changed (Kafka's ``quotaLimit`` of its
    metric tags): user and client-id entities for tags with both, user ones for a user's, client-id
    ones for a client id's."""
    user, client_id = tags
    if user and client_id:
        candidates = _candidates(user, client_id)[:2] + _candidates(user, client_id)[3:5]
    elif user:
        candidates = [c for c in _candidates(user, "") if c[1] == tags]
    elif client_id:
        candidates = _candidates("?", client_id)[6:]
    else:
        return None
    for entity, _tags in candidates:
        bound = quotas.get(entity, {}).get(key)
        if bound is not None:
            return bound
    return None
