"""Kubernetes timestamps, spelled once: `metav1.Time` (RFC 3339, seconds, UTC `Z`) and `metav1.MicroTime`
(microseconds, what a Lease's acquireTime/renewTime carry)."""

from __future__ import annotations

import datetime as dt

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def format_time(value: dt.datetime) -> str:
    """metav1.Time: `2026-11-25T08:45:00Z` (a naive value is taken as UTC)."""
    aware = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    return aware.astimezone(dt.timezone.utc).strftime(TIME_FORMAT)


def now_time() -> str:
    return format_time(utc_now())


def parse_time(text: str) -> dt.datetime:
    """metav1.Time or MicroTime (any RFC 3339 offset) -> an aware datetime; without an offset, UTC."""
    value = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def format_micro_time(value: dt.datetime) -> str:
    """metav1.MicroTime: `2026-11-25T08:45:00.123456Z`."""
    return value.astimezone(dt.timezone.utc).strftime(MICRO_TIME_FORMAT)
