"""Client-side request rate limit, the token buckets client-go puts in front of requests.

Upstream's manager runs with clientConnection qps 50, burst 100 (its config defaults); trainyard ships
the same limits so both controllers put the same ceiling on the API server, and benchmarks compare
them at equal limits. A negative qps disables the limit (as in client-go).

The limit is per kind, as upstream's really is: controller-runtime builds one REST client per
GroupVersionKind (lists apart: their kind is `...List`), and client-go gives each REST client its own
bucket at the configured qps/burst (`rest.RESTClientForConfigAndClient`). So upstream sends up to 50
TrainJob status writes, 50 JobSet applies and 50 PodGroup applies per second at once; one bucket for
the whole process held trainyard to a third of that.
"""

from __future__ import annotations

import threading
import time

UPSTREAM_QPS = 50.0
UPSTREAM_BURST = 100


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved up; `acquire()` takes one, waiting if none is left.

    Waiting callers reserve their token first (the balance may go negative), so concurrent callers are
    served in arrival order at exactly `qps`, never in a burst after a pause.
    """

    def __init__(self, qps: float, burst: int, clock=time.monotonic, sleep=time.sleep):
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1 (got qps={qps}, burst={burst})")
        self.qps, self.burst = float(qps), int(burst)
        self.clock, self.sleep = clock, sleep
        self.tokens = float(burst)
        self.updated = clock()
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token now; the seconds the caller must wait before using it."""
        with self.lock:
            now = self.clock()
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.qps)
            self.updated = now
            self.tokens -= 1.0
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            self.sleep(delay)


class PerKindLimits:
    """One TokenBucket per kind key (see the module docstring), made on first use."""

    def __init__(self, qps: float, burst: int, clock=time.monotonic, sleep=time.sleep):
        TokenBucket(qps, burst)  # the same refusal of meaningless limits, before any request
        self.qps, self.burst, self.clock, self.sleep = float(qps), int(burst), clock, sleep
        self.buckets: dict[str, TokenBucket] = {}
        self.lock = threading.Lock()

    def bucket(self, kind: str) -> TokenBucket:
        with self.lock:
            found = self.buckets.get(kind)
            if found is None:
                found = self.buckets[kind] = TokenBucket(self.qps, self.burst, self.clock, self.sleep)
            return found

    def acquire(self, kind: str) -> None:
        self.bucket(kind).acquire()


def client_limiter(qps: float, burst: int) -> PerKindLimits | None:
    """The limits for `--kube-api-qps/--kube-api-burst`; None (no limit) for a negative qps."""
    if qps < 0:
        return None
    return PerKindLimits(qps, burst)
