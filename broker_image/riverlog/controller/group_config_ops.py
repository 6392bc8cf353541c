"""Group-level configs on the controller: the ConfigRecords (resource type GROUP, 32) that change a
group's overrides, after Kafka's checks of the group's complete new set.

As in Kafka, the controller validates (``group_config.validate``) against the broker
settings it is handed (``limits``: the defaults and min/max bounds), and a group's configs exist
whether or not the group does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..group_config import GROUP_RESOURCE, InvalidGroupConfig, validate
from ..protocol.errors import ErrorCode
from .image import MetadataImage
from .records import ConfigRecord, Record
from .topic_ops import Outcome


def alter_group_configs(
    image: MetadataImage, name: str, new_values: Mapping[str, str | None], *, replace_all: bool,
    limits: Mapping[str, str],
) -> Outcome:
    """Records that make group ``name``'s overrides ``new_values`` (None deletes a key);
    ``replace_all`` is the legacy AlterConfigs semantics: keys not named are removed."""
    if not name:
        return Outcome(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    current = image.configs.get((GROUP_RESOURCE, name), {})
    merged = {} if replace_all else dict(current)
    for key, value in new_values.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    try:
        validate(merged, limits)
    except InvalidGroupConfig as exc:
        return Outcome(ErrorCode.INVALID_CONFIG, str(exc))
    records: list[Record] = [ConfigRecord(GROUP_RESOURCE, name, key, None) for key in current if key not in merged]
    records += [ConfigRecord(GROUP_RESOURCE, name, key, value) for key, value in merged.items()
                if current.get(key) != value]
    return Outcome(records=records)
