"""The client-side token bucket: upstream's qps/burst semantics, on a simulated clock (no real sleeping)."""

from __future__ import annotations

import pytest

from trainyard.controller.runtime.apiserver import limit_kind
from trainyard.controller.runtime.ratelimit import (
    UPSTREAM_BURST,
    UPSTREAM_QPS,
    PerKindLimits,
    TokenBucket,
    client_limiter,
)


class SimulatedClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def bucket(qps: float, burst: int) -> tuple[TokenBucket, SimulatedClock]:
    clock = SimulatedClock()
    return TokenBucket(qps, burst, clock=clock, sleep=clock.sleep), clock


@pytest.mark.parametrize("qps,burst,requests,seconds", [
    (50, 100, 100, 0.0),       # a full burst goes out at once
    (50, 100, 150, 1.0),       # then exactly qps: 50 more take one second
    (50, 100, 1100, 20.0),     # 1000 beyond the burst at 50/s
    (10, 1, 11, 1.0),
])
def test_requests_leave_at_burst_then_at_qps(qps, burst, requests, seconds):
    limiter, clock = bucket(qps, burst)
    for _ in range(requests):
        limiter.acquire()
    assert clock.now == pytest.approx(seconds)


def test_a_quiet_spell_refills_up_to_the_burst_only():
    limiter, clock = bucket(10, 5)
    for _ in range(5):
        limiter.acquire()
    clock.now += 60  # a minute idle saves at most `burst` tokens
    for _ in range(5):
        assert limiter.reserve() == 0
    assert limiter.reserve() == pytest.approx(0.1)


def test_concurrent_reservations_queue_in_arrival_order():
    limiter, _ = bucket(4, 1)
    assert [limiter.reserve() for _ in range(4)] == pytest.approx([0, 0.25, 0.5, 0.75])


@pytest.mark.parametrize("qps,burst", [(0, 10), (5, 0), (-1, 10)])
def test_a_bucket_refuses_limits_that_mean_nothing(qps, burst):
    with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
        TokenBucket(qps, burst)


def test_shipped_defaults_are_upstreams_and_a_negative_qps_means_no_limit():
    assert (UPSTREAM_QPS, UPSTREAM_BURST) == (50.0, 100)  # trainer's config defaults (clientConnection)
    assert client_limiter(-1, 100) is None
    limits = client_limiter(UPSTREAM_QPS, UPSTREAM_BURST)
    assert limits is not None and (limits.qps, limits.burst) == (50.0, 100)


def test_each_kind_has_its_own_bucket_as_upstreams_rest_clients_do():
    clock = SimulatedClock()
    limits = PerKindLimits(10, 10, clock=clock, sleep=clock.sleep)
    for _ in range(10):  # one kind's burst ...
        limits.acquire("apis/trainer.kubeflow.org/v1alpha1/trainjobs")
    for _ in range(10):  # ... leaves another kind's untouched
        limits.acquire("apis/jobset.x-k8s.io/v1alpha2/jobsets")
    assert clock.now == 0.0
    limits.acquire("apis/trainer.kubeflow.org/v1alpha1/trainjobs")  # the first kind now waits
    assert clock.now == pytest.approx(0.1)
    with pytest.raises(ValueError, match="qps > 0"):
        PerKindLimits(0, 10)


TJ = "/apis/trainer.kubeflow.org/v1alpha1"


@pytest.mark.parametrize("method, path, kind", [
    ("PATCH", f"{TJ}/namespaces/ns/trainjobs/tj", "apis/trainer.kubeflow.org/v1alpha1/trainjobs"),
    ("PATCH", f"{TJ}/namespaces/ns/trainjobs/tj/status", "apis/trainer.kubeflow.org/v1alpha1/trainjobs"),
    ("GET", f"{TJ}/namespaces/ns/trainjobs/tj", "apis/trainer.kubeflow.org/v1alpha1/trainjobs"),
    ("GET", f"{TJ}/namespaces/ns/trainjobs", "apis/trainer.kubeflow.org/v1alpha1/trainjobs list"),
    ("WATCH", f"{TJ}/trainjobs", "apis/trainer.kubeflow.org/v1alpha1/trainjobs list"),
    ("POST", "/api/v1/namespaces/ns/events", "api/v1/events"),
    ("GET", "/api/v1/namespaces/ns", "api/v1/namespaces"),
    ("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/p",
     "apis/scheduling.volcano.sh/v1beta1/podgroups"),
    ("PATCH", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/p", "apis/scheduling.x-k8s.io/v1alpha1/podgroups"),
], ids=lambda v: v if v in ("PATCH", "GET", "WATCH", "POST") else None)
def test_requests_draw_from_the_bucket_of_their_group_version_and_kind(method, path, kind):
    assert limit_kind(method, path) == kind
