"""The Pulumi SDK speed-ups of the platform program: each keeps the SDK's observable behaviour."""

from __future__ import annotations

from collections import deque

import pulumi
import pytest

from trainyard.platform.components import sdk_speedups
from trainyard.platform.components.sdk_speedups import OutputTracker

# Each script is a list of (operation, argument); both containers run it and must agree step by step.
SCRIPTS = {
    "fifo order": [("append", 1), ("append", 2), ("append", 3), ("popleft", None), ("popleft", None)],
    "remove from the middle": [("append", 1), ("append", 2), ("append", 3), ("remove", 2), ("popleft", None),
                               ("popleft", None)],
    "an unfinished task goes back to the end": [("append", 1), ("append", 2), ("popleft", None), ("append", 1),
                                                ("popleft", None), ("popleft", None)],
    "remove of an absent item": [("append", 1), ("remove", 9)],
    "popleft of an empty one": [("popleft", None)],
    "clear": [("append", 1), ("append", 2), ("clear", None), ("append", 3), ("popleft", None)],
}


def _step(container, operation: str, argument):
    try:
        result = getattr(container, operation)() if argument is None else getattr(container, operation)(argument)
        return ("ok", result, len(container))
    except (ValueError, IndexError) as err:
        return (type(err).__name__, None, len(container))


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_tracker_behaves_as_the_deque_it_replaces(script):
    reference, tracker = deque(), OutputTracker()
    for operation, argument in script:
        assert _step(tracker, operation, argument) == _step(reference, operation, argument), (operation, argument)
    assert list(tracker) == list(reference)


def test_installed_tracker_still_resolves_every_output():
    """Under the SDK's own mocks: after install, outputs registered by a program resolve and the SDK's wait for
    outstanding outputs sees them (the tracker is what `SETTINGS.outputs` now is)."""
    from pulumi.runtime.settings import SETTINGS

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="trainyard", stack="test", preview=False)
    seen = {}

    @pulumi.runtime.test
    def program():
        assert sdk_speedups.track_outputs_in_constant_time() is True
        assert isinstance(SETTINGS.outputs, OutputTracker)
        assert sdk_speedups.track_outputs_in_constant_time() is False  # already a tracker: nothing to replace
        chained = pulumi.Output.from_input(20).apply(lambda v: v + 1).apply(lambda v: v * 2)
        return chained.apply(lambda v: seen.setdefault("value", v))

    program()
    assert seen == {"value": 42}
    assert len(SETTINGS.outputs) == 0  # every resolved output left the tracker


TYPED_CLASSES = ["pulumi_kubernetes.meta.v1.ObjectMetaArgs", "pulumi_kubernetes.core.v1.ResourceQuotaSpecArgs",
                 "pulumi_kubernetes.rbac.v1.PolicyRuleArgs", "pulumi_kubernetes.meta.v1.outputs.ObjectMeta",
                 "pulumi_kubernetes.core.v1.Namespace"]


def _class(dotted: str) -> type:
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_cached_type_hints_equal_the_sdk_s_own(monkeypatch):
    from pulumi import _types

    monkeypatch.setattr(_types, "_types_from_py_properties", _types._types_from_py_properties)  # undone after
    uncached = {name: _types._types_from_py_properties(_class(name)) for name in TYPED_CLASSES}
    assert sdk_speedups.cache_type_hints() is True
    assert sdk_speedups.cache_type_hints() is False  # already cached
    for name in TYPED_CLASSES:
        assert _types._types_from_py_properties(_class(name)) == uncached[name], name
    assert _types._types_from_py_properties.cache_info().hits == 0
    assert _types.input_type_types(_class(TYPED_CLASSES[0])) == uncached[TYPED_CLASSES[0]]  # through the SDK's caller
    assert _types._types_from_py_properties.cache_info().hits == 1


@pytest.mark.parametrize("environ, dropped", [({}, True), ({"TRAINYARD_PULUMI_SDK_DEBUG": "1"}, False),
                                              ({"TRAINYARD_PULUMI_SDK_DEBUG": "0"}, True)],
                         ids=["default: dropped", "asked for: kept", "0: dropped"])
def test_debug_logs_are_dropped_unless_asked_for(monkeypatch, environ, dropped):
    import pulumi.log

    sent = []
    monkeypatch.setattr(pulumi.log, "debug", lambda msg, *args, **kwargs: sent.append(msg))
    assert sdk_speedups.drop_debug_logs(environ) is dropped
    pulumi.log.debug("resource registration prepared")
    assert sent == ([] if dropped else ["resource registration prepared"])
