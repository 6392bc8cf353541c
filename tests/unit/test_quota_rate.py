"""Client quota math with a fake clock (explicit milliseconds): Kafka's sampled rate, its window
size, the throttle time, which quota applies to a user and client id, and the manager's sensors."""

from __future__ import annotations

import pytest
from riverlog.quotas.manager import ClientQuotaManager, QuotaKind
from riverlog.quotas.rate import SampledRate, WindowConfig, throttle_time_ms
from riverlog.quotas.resolution import bound_for_tags, resolve

pytestmark = pytest.mark.unit

KAFKA = WindowConfig(samples=11, window_ms=1000)


def test_a_young_rate_divides_by_at_least_ten_windows() -> None:
    rate = SampledRate(KAFKA)
    rate.record(10_000, 0)
    # 0 ms elapsed counts as 10 full windows: 10,000 bytes over 10 s.
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    rate.record(10_000, 2500)
    assert rate.window_size_ms(2500) == 10_500  # 2 full windows and a half, topped up to 10 full
    assert rate.measure(2500) == pytest.approx(20_000 / 10.5)


def test_an_old_rate_divides_by_the_time_since_its_oldest_sample() -> None:
    rate = SampledRate(KAFKA)
    for second in range(11):
        rate.record(1000, second * 1000)
    assert rate.window_size_ms(10_000) == 10_000
    assert rate.measure(10_000) == pytest.approx(1100.0)
    rate.record(1000, 11_000)  # the 12th slot; the first sample's last value is now 11 s old: forgotten
    assert rate.window_size_ms(11_000) == 10_000
    assert rate.total(11_000) == pytest.approx(11_000)
    rate.record(1000, 12_000)  # reuses the first slot; the sample of second 1 is forgotten
    assert rate.window_size_ms(12_000) == 10_000
    assert rate.total(12_000) == pytest.approx(11_000)
    rate.record(500, 12_400)  # same sample as the value at 12 s
    assert rate.window_size_ms(12_400) == 10_400
    assert rate.measure(12_400) == pytest.approx(11_500 / 10.4)


def test_samples_idle_longer_than_every_window_are_forgotten() -> None:
    rate = SampledRate(KAFKA)
    rate.record(50_000, 0)
    assert rate.total(10_999) == 50_000
    assert rate.total(11_000) == 0  # last value 11 windows ago: reset
    assert rate.measure(11_000) == 0


def test_throttle_time_is_the_wait_that_brings_the_rate_back_to_the_quota() -> None:
    assert throttle_time_ms(900.0, 1000.0, 10_000) == 0
    assert throttle_time_ms(1000.0, 1000.0, 10_000) == 0
    assert throttle_time_ms(1500.0, 1000.0, 10_000) == 5000
    assert throttle_time_ms(1000.1, 1000.0, 10_000) == 1
    # Waiting that long with nothing sent takes the rate back to the quota.
    rate = SampledRate(KAFKA)
    rate.record(15_000, 0)
    wait = throttle_time_ms(rate.measure(0), 1000.0, rate.window_size_ms(0))
    assert wait == 5000


USER, CLIENT = "user", "client-id"


def test_quota_precedence_is_kafkas() -> None:
    order = [
        ((CLIENT, "app"), (USER, "alice")),
        ((CLIENT, None), (USER, "alice")),
        ((USER, "alice"),),
        ((CLIENT, "app"), (USER, None)),
        ((CLIENT, None), (USER, None)),
        ((USER, None),),
        ((CLIENT, "app"),),
        ((CLIENT, None),),
    ]
    tags = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"), ("alice", ""),
            ("", "app"), ("", "app")]
    quotas = {entity: {"producer_byte_rate": float(i + 1)} for i, entity in enumerate(order)}
    for i in range(len(order)):
        assert resolve(quotas, "producer_byte_rate", "alice", "app") == (float(i + 1), tags[i])
        del quotas[order[i]]
    assert resolve(quotas, "producer_byte_rate", "alice", "app") == (None, ("", "app"))


def test_a_quota_of_another_key_does_not_apply() -> None:
    quotas = {((USER, "alice"),): {"consumer_byte_rate": 10.0}, ((USER, None),): {"producer_byte_rate": 5.0}}
    assert resolve(quotas, "producer_byte_rate", "alice", "app") == (5.0, ("alice", ""))
    assert resolve(quotas, "consumer_byte_rate", "bob", "app") == (None, ("", "app"))


def test_without_a_client_id_only_user_quotas_apply() -> None:
    quotas = {((CLIENT, None),): {"producer_byte_rate": 5.0}, ((USER, None),): {"request_percentage": 5.0}}
    assert resolve(quotas, "producer_byte_rate", "alice", "") == (None, ("", ""))
    assert resolve(quotas, "request_percentage", "alice", "") == (5.0, ("alice", ""))


def test_the_manager_throttles_past_the_quota_and_shares_a_users_rate() -> None:
    manager = ClientQuotaManager(KAFKA, clock=lambda: 0)
    assert manager.record(QuotaKind.PRODUCE, "alice", "a", 10**9, now=0) == 0  # no quotas: nothing counted
    manager.update({((USER, "alice"),): {"producer_byte_rate": 1000.0}})
    assert manager.enabled(QuotaKind.PRODUCE) and not manager.enabled(QuotaKind.FETCH)
    assert manager.record(QuotaKind.PRODUCE, "alice", "a", 10_000, now=0) == 0  # 1000/s over 10 s: at the quota
    # Another connection of alice's counts in the same rate: 15,000 over 10 s is 50 % over.
    assert manager.record(QuotaKind.PRODUCE, "alice", "b", 5_000, now=0) == 5000
    assert manager.record(QuotaKind.PRODUCE, "bob", "a", 10**9, now=0) == 0  # bob has no quota
    manager.throttled(QuotaKind.PRODUCE, "alice", "b", 5000)
    stats = {(kind, user, client): rest for kind, user, client, *rest in manager.stats()}
    rate, bound, throttle_ms, throttled, counted = stats[("produce", "alice", "")]
    assert (bound, throttle_ms, throttled, counted) == (1000.0, 5000, 1, 15_000)
    assert rate == pytest.approx(1500.0)


def test_request_time_throttles_at_most_one_window_and_fetch_bytes_can_be_taken_back() -> None:
    manager = ClientQuotaManager(KAFKA, clock=lambda: 0)
    manager.update({((CLIENT, None),): {"request_percentage": 1.0, "consumer_byte_rate": 100.0}})
    # 50 percent-seconds against 1 % over 10 s: far over, but never more than one window.
    assert manager.record(QuotaKind.REQUEST, "ANONYMOUS", "c", 50.0, now=0) == 1000
    assert manager.record(QuotaKind.FETCH, "ANONYMOUS", "c", 2000, now=0) == 10_000  # 200/s against 100/s
    manager.unrecord(QuotaKind.FETCH, "ANONYMOUS", "c", 2000, now=0)
    assert manager.record(QuotaKind.FETCH, "ANONYMOUS", "c", 1000, now=0) == 0


def test_a_sensors_bound_follows_the_quotas_of_its_tags() -> None:
    quotas = {((CLIENT, None), (USER, "alice")): {"producer_byte_rate": 1.0},
              ((USER, None),): {"producer_byte_rate": 2.0},
              ((CLIENT, None),): {"producer_byte_rate": 3.0}}
    assert bound_for_tags(quotas, "producer_byte_rate", ("alice", "app")) == 1.0
    assert bound_for_tags(quotas, "producer_byte_rate", ("bob", "")) == 2.0
    assert bound_for_tags(quotas, "producer_byte_rate", ("", "app")) == 3.0
    assert bound_for_tags(quotas, "consumer_byte_rate", ("", "app")) is None
    manager = ClientQuotaManager(KAFKA, clock=lambda: 0)
    manager.update(quotas)
    manager.record(QuotaKind.PRODUCE, "bob", "x", 1, now=0)
    manager.update({((USER, None),): {"producer_byte_rate": 5.0}})
    assert [s[4] for s in manager.stats()] == [5.0]
