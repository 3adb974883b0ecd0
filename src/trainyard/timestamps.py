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


def format_epoch(seconds: float) -> str:
    """metav1.Time of epoch seconds."""
    return format_time(dt.datetime.fromtimestamp(seconds, dt.timezone.utc))


def now_time() -> str:
    return format_time(utc_now())


def parse_time(text: str) -> dt.datetime:
    """metav1.Time or MicroTime (any RFC 3339 offset) -> an aware datetime; without an offset, UTC."""
    value = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def duration_words(seconds: float) -> str:
    """"40 s", "12 min", "1.5 h", "2.0 days": how long, in an event or a verdict a person reads."""
    if seconds < 90:
        return f"{round(seconds / 10) * 10:.0f} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60):.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def duration_short(seconds: float | None) -> str:
    """"45s", "5.0m", "2.1h" ("-" for none): how long, in a table column."""
    if seconds is None:
        return "-"
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.1f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


def format_micro_time(value: dt.datetime) -> str:
    """metav1.MicroTime: `2026-11-25T08:45:00.123456Z`."""
    return value.astimezone(dt.timezone.utc).strftime(MICRO_TIME_FORMAT)
