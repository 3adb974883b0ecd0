"""The thin API layer of `fit`/`report`: what it sends (dry-run only) and how refusals come back."""

from __future__ import annotations

import json

import pytest

from trainyard.capacity import live
from trainyard.controller.runtime.transport import ApiError


class Recorder:
    def __init__(self, error: ApiError | None = None):
        self.calls, self.error = [], error

    def _call(self, method, path, body=None, query=None, **_):
        self.calls.append((method, path, body, query))
        if self.error:
            raise self.error
        return {}


def test_dry_run_create_sends_generate_name_and_dry_run_all():
    api = Recorder()
    obj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "tj", "namespace": "ns", "resourceVersion": "1", "uid": "u"}, "spec": {}, "status": {}}
    assert live.dry_run_create(api, obj, live.TRAINJOBS) is None
    method, path, body, query = api.calls[0]
    assert (method, path, query) == ("POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs",
                                     {"dryRun": "All"})
    assert body["metadata"] == {"generateName": "tj-", "namespace": "ns"} and "status" not in body
    assert obj["metadata"]["name"] == "tj"  # the caller's object is left alone


def test_dry_run_refusal_is_the_api_servers_message():
    exc = ApiError(status=403, reason="Forbidden")
    exc.body = json.dumps({"message": "exceeded quota: tenant-quota"})
    assert live.dry_run_create(Recorder(exc), {"metadata": {"name": "x", "namespace": "n"}}, live.TRAINJOBS) == \
        "exceeded quota: tenant-quota"


def test_fit_and_report_without_any_kubeconfig_say_how_to_point_them_at_a_cluster(tmp_path, monkeypatch):
    """A fresh shell after `make down`: no $KUBECONFIG, no ~/.kube/config, no local cluster running."""
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("trainyard.cluster.local.is_running", lambda name: False)
    tj = tmp_path / "tj.yaml"
    tj.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: a, namespace: n}\n"
                  "spec: {runtimeRef: {name: r}}\n")
    for args in (["fit", str(tj)], ["report"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "pass --kubeconfig FILE or set KUBECONFIG, or start the local platform with `make up`" in result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize(("metadata", "shown"), [
    ({"name": "mnist", "namespace": "team-a"}, "team-a/mnist"),
    ({"generateName": "torch-example-", "namespace": "team-a"}, "team-a/torch-example-*"),
    ({"namespace": "team-a"}, "team-a/(no name)"),
])
def test_fit_names_the_trainjob_even_when_the_api_server_would(metadata, shown):
    from trainyard.capacity.fit_check import display_name

    assert display_name({"metadata": metadata}) == shown


class ListRecorder:
    def __init__(self):
        self.selectors: dict[str, str | None] = {}
        self.lists: list[tuple[str, str | None, str | None]] = []

    def list(self, resource, namespace=None, label_selector=None, field_selector=None):
        self.selectors[resource.plural] = field_selector
        self.lists.append((resource.plural, namespace, field_selector))
        return {"items": []}


@pytest.mark.parametrize("unbound, selector", [
    (False, "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"),  # report, fit: capacity is bound pods
    (True, "status.phase!=Succeeded,status.phase!=Failed"),                   # the loops that tolerate pending pods
])
def test_snapshot_lists_pending_pods_only_for_whoever_needs_them(unbound, selector):
    api = ListRecorder()
    live.snapshot(api, unbound_pods=unbound)
    assert api.selectors["pods"] == selector




@pytest.mark.parametrize("podgroup_events, events_listed", [
    (True, [live.PODGROUP_VERDICTS]),  # report --all / --out: every row's reason
    (False, []),                       # report's text (reads the shown rows' namespaces itself), fit, the loops
])
def test_snapshot_reads_events_only_for_whoever_shows_them(podgroup_events, events_listed):
    """Events are read from etcd, never from the API server's cache: each cluster-wide list of them costs seconds
    at 10,000 TrainJobs, so only the report's rows that show them ask; stalled TrainJobs come with the Namespaces."""
    api = ListRecorder()
    live.snapshot(api, podgroup_events=podgroup_events)
    assert sorted(sel for plural, ns, sel in api.lists if plural == "events") == sorted(events_listed)
    assert {plural for plural, _, _ in api.lists} >= {"nodes", "pods", "queues", "podgroups", "hypernodes"}


def test_events_in_lists_each_namespace_once_with_the_verdict_selector():
    api = ListRecorder()
    assert live.events_in(api, ["team-b", "team-a", "team-b"]) == []
    assert sorted(api.lists) == [("events", "team-a", live.PODGROUP_VERDICTS), ("events", "team-b", live.PODGROUP_VERDICTS)]


def test_background_hands_back_the_result_or_the_exception():
    assert live.Background(lambda a, b=0: a + b, 1, b=2).result() == 3
    failing = live.Background(lambda: (_ for _ in ()).throw(ApiError(500, "boom")))
    with pytest.raises(ApiError):
        failing.result()


class SelectorRefusing(ListRecorder):
    """An API server whose PodGroup CRD has no selectable phase (Volcano installed otherwise): 400 on the selector."""

    def list(self, resource, namespace=None, label_selector=None, field_selector=None):
        super().list(resource, namespace, label_selector, field_selector)
        if field_selector:
            raise ApiError(400, "BadRequest", '{"message": "field label not supported: status.phase"}')
        return {"items": [{"metadata": {"name": "g"}}]}


def test_unfinished_pod_groups_read_the_whole_list_where_the_phase_is_not_selectable():
    api = SelectorRefusing()
    assert [g["metadata"]["name"] for g in live.unfinished_pod_groups(api)] == ["g"]
    assert api.lists == [("podgroups", None, live.UNFINISHED), ("podgroups", None, None)]
