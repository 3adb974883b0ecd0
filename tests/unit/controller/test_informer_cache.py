"""Reconcile reads from the informers' stores (as upstream reads its cache): a second reconcile of an
unchanged TrainJob costs no GET of anything the informers hold, and stores follow list, watch and writes."""

from __future__ import annotations

import pytest

from trainyard.controller.runtime.apiserver import RESOURCES
from trainyard.controller.runtime.cache import CachedReads, Store
from trainyard.controller.runtime.informer import Informer
from trainyard.controller.runtime.manager import is_controlled_by_a_trainjob
from trainyard.controller.runtime.reconciler import reconcile

from ctl_builders import runtime, trainjob
from fake_apiserver import FakeApiServer

CACHED_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "JobSet", "PodGroup", "ConfigMap",
                "Secret", "Queue", "Namespace")
OWNER = [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "controller": True}]


def config_map(name: str, owned: bool) -> dict:
    meta = {"name": name, "namespace": "ns", **({"ownerReferences": OWNER} if owned else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def cached(api: FakeApiServer) -> CachedReads:
    """The stores a manager's informers would hold after listing `api`'s objects."""
    stores = {}
    for kind in CACHED_KINDS:
        resource = RESOURCES[kind]
        store = Store(resource, keep=is_controlled_by_a_trainjob if kind in ("ConfigMap", "Secret") else lambda o: True)
        store.replace([o for o in api.objects.values() if o["kind"] == kind and
                       o["apiVersion"] == resource.api_version])
        stores[resource] = store
    return CachedReads(api, stores)


def test_a_reconcile_after_the_first_reads_only_what_no_informer_holds():
    tj = trainjob(runtime_name="rt", kind="TrainingRuntime")
    api = FakeApiServer(tj, runtime(ml={"torch": {}}, pod_group={"volcano": {}}, name="rt", kind="TrainingRuntime"),
                        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}})
    reads = cached(api)
    reconcile(reads, "ns", "tj")
    applied = api.verbs("apply")
    assert "JobSet/tj" in applied and "PodGroup/tj" in applied
    api.calls.clear()
    reconcile(reads, "ns", "tj")  # the stores saw the first reconcile's writes (read-your-writes)
    assert api.verbs("get") == [], "every read came from a store"
    assert "JobSet/tj" not in api.verbs("apply"), "the existing JobSet comes from the store: not re-applied"


def test_reads_fall_back_to_the_api_server_until_the_informer_has_listed():
    api = FakeApiServer(config_map("cm", owned=True))
    store = Store(RESOURCES["ConfigMap"])
    reads = CachedReads(api, {RESOURCES["ConfigMap"]: store})
    assert reads.get(RESOURCES["ConfigMap"], "cm", "ns")["metadata"]["name"] == "cm"
    assert api.verbs("get") == ["ConfigMap/cm"]
    store.replace([])
    assert reads.get(RESOURCES["ConfigMap"], "cm", "ns") is None, "synced: the store is the truth"
    assert api.verbs("get") == ["ConfigMap/cm"]


def test_stores_keep_only_configmaps_and_secrets_a_trainjob_controls_and_hand_out_copies():
    store = Store(RESOURCES["ConfigMap"], keep=is_controlled_by_a_trainjob)
    store.replace([config_map("mine", owned=True), config_map("kube-root-ca.crt", owned=False)])
    assert len(store) == 1
    copy = store.get("mine", "ns")
    copy["metadata"]["name"] = "changed"
    assert store.get("mine", "ns")["metadata"]["name"] == "mine"


def test_stores_drop_managed_fields_whichever_way_an_object_arrives():
    """No reconcile reads managedFields: listed, watched and written objects are held without them."""
    def with_fields(name):
        obj = config_map(name, owned=True)
        obj["metadata"]["managedFields"] = [{"manager": "trainer", "fieldsV1": {"f:data": {}}}]
        return obj

    store = Store(RESOURCES["ConfigMap"], keep=is_controlled_by_a_trainjob)
    store.replace([with_fields("listed")])
    store.put(with_fields("watched"))
    store.put(with_fields("written"), only_if_newer=True)
    for name in ("listed", "watched", "written"):
        kept = store.get(name, "ns")
        assert kept["metadata"]["name"] == name and "managedFields" not in kept["metadata"]


class ListThenWatch:
    """An API that lists `items` and then streams `events` on the watch."""

    def __init__(self, items, events):
        self.items, self.events = items, events

    def list(self, resource):
        return {"items": list(self.items), "metadata": {"resourceVersion": "10"}}

    def watch(self, resource, version, timeout):
        yield from self.events


@pytest.mark.parametrize("events,expected", [
    ([], {"a", "b"}),
    ([("ADDED", config_map("c", True))], {"a", "b", "c"}),
    ([("DELETED", config_map("a", True))], {"b"}),
    ([("MODIFIED", config_map("b", False))], {"a"}),  # no longer controlled: dropped
    ([("BOOKMARK", {"metadata": {"resourceVersion": "12"}})], {"a", "b"}),
])
def test_informer_store_follows_list_then_watch_and_is_filled_before_handlers_run(events, expected):
    seen_in_store = []
    store = Store(RESOURCES["ConfigMap"], keep=is_controlled_by_a_trainjob)
    informer = Informer(ListThenWatch([config_map("a", True), config_map("b", True)], events), RESOURCES["ConfigMap"],
                        lambda _t, obj: seen_in_store.append(store.get(obj["metadata"]["name"], "ns") is not None
                                                             or _t == "DELETED" or not is_controlled_by_a_trainjob(obj)),
                        resync_seconds=300, store=store)
    informer._list()
    informer._watch("10", stop=_NeverStop())
    assert {name for _, name in store.objects} == expected
    assert all(seen_in_store) and informer.synced.is_set()


def test_a_relist_forgets_objects_deleted_while_the_watch_was_away():
    store = Store(RESOURCES["ConfigMap"])
    store.replace([config_map("gone", True), config_map("kept", True)])
    Informer(ListThenWatch([config_map("kept", True)], []), RESOURCES["ConfigMap"], lambda *_: None, 300,
             store=store)._list()
    assert {name for _, name in store.objects} == {"kept"}


class _NeverStop:
    def is_set(self) -> bool:
        return False


def test_admission_confirms_a_cache_miss_with_the_api_server():
    """A runtime created a moment ago, then at once a TrainJob naming it: admission must not refuse on a
    store that has not seen the runtime yet; reconcile (no fresh_on_miss) trusts the synced store."""
    rt = runtime(name="just-created", kind="TrainingRuntime")
    api = FakeApiServer(rt)
    store = Store(RESOURCES["TrainingRuntime"])
    store.replace([])  # synced before the runtime's watch event arrived
    reads = CachedReads(api, {RESOURCES["TrainingRuntime"]: store})
    assert reads.get(RESOURCES["TrainingRuntime"], "just-created", "ns") is None
    assert api.verbs("get") == []
    found = reads.for_admission().get(RESOURCES["TrainingRuntime"], "just-created", "ns")
    assert found["metadata"]["name"] == "just-created" and api.verbs("get") == ["TrainingRuntime/just-created"]
    store.put(rt)
    api.calls.clear()
    assert reads.for_admission().get(RESOURCES["TrainingRuntime"], "just-created", "ns") is not None
    assert api.verbs("get") == [], "a hit is served from the store"


def test_resource_quotas_are_listed_from_the_store_once_synced():
    def quota(name: str, namespace: str) -> dict:
        return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace}}

    api = FakeApiServer(quota("gpus", "team-a"))
    store = Store(RESOURCES["ResourceQuota"])
    reads = CachedReads(api, {RESOURCES["ResourceQuota"]: store})
    assert [q["metadata"]["name"] for q in reads.list(RESOURCES["ResourceQuota"], "team-a")["items"]] == ["gpus"]
    assert api.verbs("list") == ["ResourceQuota"], "not listed yet: the API server answers"
    store.replace([quota("gpus", "team-a"), quota("pods", "team-a"), quota("gpus", "team-b")])
    listed = reads.list(RESOURCES["ResourceQuota"], "team-a")["items"]
    assert [q["metadata"]["name"] for q in listed] == ["gpus", "pods"]
    assert api.verbs("list") == ["ResourceQuota"], "synced: no request"


def _jobset(version: str, status: dict | None = None) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "tj", "namespace": "ns", "resourceVersion": version}, **({"status": status} if status else {})}


@pytest.mark.parametrize(("stored", "answer", "kept"), [
    ("11", "10", "11"),  # the apply's answer arrived after the watch delivered the status update: keep the newer
    ("10", "12", "12"),  # a newer answer replaces what the watch had
    (None, "10", "10"),  # nothing stored yet
    ("abc", "10", "10"),  # not integers: never called older
])
def test_a_writes_answer_never_replaces_a_newer_watched_version(stored, answer, kept):
    """Read-your-writes (`CachedReads._remember`) must not hide a later change: seen in the differential suite as a
    TrainJob whose jobsStatus never came (its reconcile read the JobSet as the older apply answer had it)."""
    store = Store(RESOURCES["JobSet"])
    if stored:
        store.put(_jobset(stored, {"replicatedJobsStatus": [{"name": "node", "suspended": 1}]}))
    store.put(_jobset(answer), only_if_newer=True)
    assert store.get("tj", "ns")["metadata"]["resourceVersion"] == kept


def test_watch_events_always_replace():
    store = Store(RESOURCES["JobSet"])
    store.put(_jobset("11"))
    store.put(_jobset("10"))  # the watch is the order of record
    assert store.get("tj", "ns")["metadata"]["resourceVersion"] == "10"


def test_a_stored_object_takes_about_its_json_length_in_memory():
    """orjson returns its write buffer (4 KiB at least); a store of thousands of children must hold only the JSON."""
    import tracemalloc

    store = Store(RESOURCES["ConfigMap"])
    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": "ns"},
                "data": {"runtime": "x" * 1500}} for i in range(200)]
    tracemalloc.start()
    for obj in objects:
        store.put(obj)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert held / len(objects) < 2500, held / len(objects)  # ~1.6 KB of JSON each, plus the key and dict slot
    assert store.get("cm-7", "ns")["metadata"]["name"] == "cm-7"
