"""Three costs of the pinned Pulumi Python SDK that grow with a stack's size, removed for the platform program.

A no-op preview of a 100-tenant stack (about 3,000 resources, bench/scale.py) spent most of its time in the
program's process, in the SDK rather than in trainyard (py-spy, 40 Hz, `--parallel 128`; figures in docs/tests.md):

1. Outstanding outputs: the SDK keeps every unresolved Output's future in a `collections.deque` and drops each with
   `deque.remove` when it resolves, a linear scan per output; with ~20,000 outputs in flight that was a third of the
   program's CPU. Pulumi later made it a set (reported as pulumi/pulumi#16055; `SETTINGS.outputs = set()` in the SDK
   at 3.250). `OutputTracker` keeps the deque methods 3.188 calls, each O(1), in the same order.
2. Type hints: serialising each resource's inputs re-evaluates `typing.get_type_hints` of every input class (such
   as ObjectMetaArgs) on every use. The SDK at 3.250 caches `_types_from_py_properties` with `functools.cache`;
   the same cache is applied here (classes are immutable for a program's life, callers only read the dict).
3. Debug logs: the SDK sends four or five debug messages per resource to the engine, each a blocking gRPC call
   made on the event loop's thread, which the CLI then drops unless run with `--debug`. They are dropped in the
   program instead; `TRAINYARD_PULUMI_SDK_DEBUG=1` sends them again.

The pinned SDK must match the CLI built from tools/pulumi (tools/versions.toml says why it stays at 3.188), so
the fixes are applied here rather than by a newer SDK. Each patch checks the SDK still needs it and leaves a newer
SDK alone.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict, deque
from typing import Any, Iterator

SDK_DEBUG_ENV = "TRAINYARD_PULUMI_SDK_DEBUG"


class OutputTracker:
    """The subset of `collections.deque` that pulumi's output tracking uses, each operation O(1)."""

    def __init__(self, items: Any = ()) -> None:
        self._items: OrderedDict[Any, None] = OrderedDict((item, None) for item in items)

    def append(self, item: Any) -> None:
        self._items[item] = None

    def remove(self, item: Any) -> None:
        try:
            del self._items[item]
        except KeyError:
            raise ValueError(f"{item!r} is not tracked") from None  # deque.remove raises ValueError

    def popleft(self) -> Any:
        if not self._items:
            raise IndexError("pop from an empty OutputTracker")  # as deque.popleft
        return self._items.popitem(last=False)[0]

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))

    def __contains__(self, item: Any) -> bool:
        return item in self._items


def track_outputs_in_constant_time() -> bool:
    """Replace the SDK's deque with an OutputTracker holding the same futures; False when the SDK no longer uses a
    deque and nothing was changed.

    `SETTINGS.outputs` is a context variable: set from the program (which runs in the same task as the SDK's final
    wait for outstanding outputs), the wait sees the tracker. Futures queued earlier move into it; their done
    callbacks still look in the old deque, miss, and leave them to that final wait, which awaits finished ones."""
    from pulumi.runtime.settings import SETTINGS

    if not isinstance(SETTINGS.outputs, deque):
        return False
    with SETTINGS.lock:
        SETTINGS.outputs = OutputTracker(SETTINGS.outputs)
    return True


def cache_type_hints() -> bool:
    """Memoise the SDK's per-class property types (as its 3.250 does); False when already cached."""
    from pulumi import _types

    current = _types._types_from_py_properties
    if hasattr(current, "cache_info"):
        return False
    _types._types_from_py_properties = functools.cache(current)
    return True


def drop_debug_logs(environ: dict[str, str] | None = None) -> bool:
    """Stop sending the SDK's debug messages to the engine, unless `TRAINYARD_PULUMI_SDK_DEBUG=1`; False when
    they are kept."""
    import pulumi.log

    if (environ if environ is not None else os.environ).get(SDK_DEBUG_ENV) == "1":
        return False
    pulumi.log.debug = _no_debug_log
    return True


def _no_debug_log(msg: str, resource: Any = None, stream_id: int | None = None, ephemeral: bool | None = None) -> None:
    """`pulumi.log.debug`'s signature, sending nothing (see the module docstring, cost 3)."""


def install() -> list[str]:
    """Apply every speed-up the SDK still needs, from the program's entry point; returns the ones applied."""
    applied = {"output tracking": track_outputs_in_constant_time(), "type hints": cache_type_hints(),
               "debug logs": drop_debug_logs()}
    return [name for name, done in applied.items() if done]
