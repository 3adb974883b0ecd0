"""The plugin registry's shape, and that a new policy needs nothing but its module and one registration."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

from trainyard.controller import plugins
from trainyard.controller.admission import validate_trainjob
from trainyard.controller.build import build_objects
from trainyard.controller.plugins import REGISTRY, framework
from trainyard.controller.plugins.framework import PHASES, ObjectRef
from trainyard.controller.runtime.reconciler import reconcile
from trainyard.controller.schema import FieldError

from ctl_builders import by_kind, fixed_key, runtime, the_jobset, trainjob
from fake_apiserver import FakeApiServer

HELPERS = {"common", "framework", "gang", "torchtune"}


def test_registry_order_is_the_order_the_outputs_depend_on():
    assert [framework.plugin_name(p) for p in REGISTRY] == [
        "torch", "mpi", "plainml", "jax", "xgboost", "flux", "trainjobstatus", "coscheduling", "volcano", "tenancy",
        "jobset"]


def test_every_phase_has_the_protocol_signature():
    for plugin in REGISTRY:
        assert framework.phases_of(plugin), f"{plugin.__name__} defines no phase"
        for phase in framework.phases_of(plugin):
            params = tuple(inspect.signature(getattr(plugin, phase)).parameters)
            assert params == PHASES[phase], f"{plugin.__name__}.{phase}{params}: the protocol says {PHASES[phase]}"
    assert set(framework.BUILD_PHASES) <= set(PHASES)


def test_every_module_defining_a_phase_is_registered_and_helpers_define_none():
    registered = {framework.plugin_name(p) for p in REGISTRY}
    for module_info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"{plugins.__name__}.{module_info.name}")
        if module_info.name in HELPERS:
            assert not framework.phases_of(module), f"helper {module_info.name} defines a phase"
        else:
            assert module_info.name in registered, f"plugins/{module_info.name}.py is not in REGISTRY"


def dummy_plugin() -> types.ModuleType:
    """A new policy `dummy`: one env var, one ConfigMap it keeps, one admission rule."""
    dummy = types.ModuleType("dummy")

    def validate(trainjob, runtime, old):
        if (trainjob["spec"].get("trainer") or {}).get("numNodes") == 13:
            return [FieldError("spec.trainer.numNodes", "Invalid", "dummy dislikes 13", 13)]
        return []

    def enforce_ml_policy(info, ctx):
        info.trainer_node_container().setdefault("env", []).append({"name": "DUMMY", "value": "1"})

    def build(info, ctx):
        info.config_maps.append({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": f"{info.name}-dummy", "namespace": "ns"}, "data": {}})

    def owned_objects(trainjob, runtime):
        return [ObjectRef("v1", "ConfigMap", trainjob["metadata"]["name"] + "-dummy")]

    for fn in (validate, enforce_ml_policy, build, owned_objects):
        setattr(dummy, fn.__name__, fn)
    return dummy


def test_a_registered_plugin_runs_in_build_admission_and_reconcile():
    dummy = dummy_plugin()
    for phase in framework.phases_of(dummy):
        assert tuple(inspect.signature(getattr(dummy, phase)).parameters) == PHASES[phase]
    registry = REGISTRY[:-1] + (dummy, REGISTRY[-1])  # before jobset, which builds from the finished templates
    rt = runtime(ml={"torch": {}})

    objects = build_objects(trainjob(), rt, key_generator=fixed_key, plugins=registry)
    assert [o["metadata"]["name"] for o in by_kind(objects, "ConfigMap")] == ["tj-runtime-snapshot", "tj-dummy"]
    node = the_jobset(objects)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DUMMY", "value": "1"} in node["env"]
    assert "tj-dummy" not in [o["metadata"]["name"] for o in build_objects(trainjob(), rt, key_generator=fixed_key)]

    refused = validate_trainjob(trainjob(trainer={"numNodes": 13}), rt, plugins=registry)
    assert [str(e) for e in refused.errors] == ["spec.trainer.numNodes: Invalid value: 13: dummy dislikes 13"]
    assert validate_trainjob(trainjob(trainer={"numNodes": 13}), rt).allowed

    api = FakeApiServer(trainjob(), rt)
    reconcile(api, "ns", "tj", plugins=registry)
    assert "ConfigMap/tj-dummy" in api.verbs("get") and "ConfigMap/tj-dummy" in api.verbs("apply")


def test_each_phase_table_lists_exactly_the_plugins_defining_it_in_registry_order():
    """The typed tables (checked by mypy against framework's phase protocols) cannot go stale."""
    from trainyard.controller import plugins

    assert set(plugins.BY_PHASE) == set(framework.PHASES)
    for phase, table in plugins.BY_PHASE.items():
        defining = [p for p in REGISTRY if phase in framework.phases_of(p)]
        assert list(table) == defining, f"plugins.{phase} table: {[framework.plugin_name(p) for p in table]}"
