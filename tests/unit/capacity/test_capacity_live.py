"""The thin API layer of `fit`/`report`: what it sends (dry-run only) and how refusals come back."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from trainyard.capacity import live


class Recorder:
    def __init__(self, error: ApiException | None = None):
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
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"message": "exceeded quota: tenant-quota"})
    assert live.dry_run_create(Recorder(exc), {"metadata": {"name": "x", "namespace": "n"}}, live.TRAINJOBS) == \
        "exceeded quota: tenant-quota"
