"""Finalized features (Kafka's feature versioning, KIP-584), decided as KRaft's
``FeatureControlManager`` decides UpdateFeatures: pure functions of the image.

Riverlog knows one feature, ``transaction.version`` (0..2): it is what Java clients read to speak
transaction version 2 (KIP-890 part 2). A cluster that never set it is at 2, the level a new
Kafka 4.x cluster is formatted with. Each accepted update is a ``FeatureLevelRecord``; an update
to level 0 removes the feature (clients then see it unset, and use the classic protocol).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .image import MetadataImage
from .records import FeatureLevelRecord

TRANSACTION_VERSION = "transaction.version"
# Supported levels (min, max) and the level of a cluster that never set the feature.
SUPPORTED: dict[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2)}
DEFAULTS: dict[str, int] = {TRANSACTION_VERSION: 2}

# UpdateFeatures' upgrade types (version 1+; version 0's allow_downgrade maps to 1 or 2).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int = UPGRADE


@dataclass(frozen=True)
class FeatureOutcome:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def finalized_level(image: MetadataImage, name: str) -> int:
    return image.features.get(name, DEFAULTS.get(name, 0))


def finalized_features(image: MetadataImage) -> dict[str, int]:
    """Every feature finalized above level 0 (what ApiVersions lists)."""
    levels = {name: finalized_level(image, name) for name in SUPPORTED}
    return {name: level for name, level in levels.items() if level > 0}


def update_features(image: MetadataImage,
                    updates: Sequence[FeatureUpdate]) -> tuple[list[FeatureOutcome], list[FeatureLevelRecord]]:
    """The outcome of every update and the records to commit: all of them, or none if any
    update is refused (Kafka applies an UpdateFeatures atomically)."""
    outcomes = [_check(image, u) for u in updates]
    if any(o.error != ErrorCode.NONE for o in outcomes):
        return outcomes, []
    return outcomes, [FeatureLevelRecord(u.name, u.level) for u in updates]


def _check(image: MetadataImage, update: FeatureUpdate) -> FeatureOutcome:
    def refused(message: str) -> FeatureOutcome:
        return FeatureOutcome(update.name, ErrorCode.INVALID_UPDATE_VERSION, message)

    supported = SUPPORTED.get(update.name)
    if supported is None:
        return refused(f"The controller does not support the feature {update.name}.")
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return refused(f"Unknown upgrade type {update.upgrade_type}.")
    low, high = supported
    if not low <= update.level <= high:
        return refused(f"Invalid update version {update.level} for feature {update.name}. "
                       f"The controller supports versions {low}-{high}.")
    current = finalized_level(image, update.name)
    if update.level < current and update.upgrade_type == UPGRADE:
        return refused("Can't downgrade the version of this feature without setting the upgrade type to "
                       "either safe or unsafe downgrade.")
    return FeatureOutcome(update.name)
