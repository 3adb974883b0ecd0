"""TrainJobStatus (on in the local cluster): training code reports progress with the Kubeflow SDK to the
controller's status server, as a pod would, using the env, CA and token audience the JobSet carries."""

from __future__ import annotations

import pytest
import requests

from trainyard import k8s

from builders import EIGHT_GPUS, new_trainjob
from test_trainjob_controller import condition, create, get, jobset, runtime  # noqa: F401 (runtime: fixture)

pytestmark = pytest.mark.integration


def _token(cluster, namespace: str, audience: str, service_account: str = "default") -> str:
    from kubernetes import client

    cluster.wait(lambda: _has_service_account(cluster, namespace, service_account), what="the default ServiceAccount")
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[audience], expiration_seconds=600))
    return cluster.core.create_namespaced_service_account_token(service_account, namespace, request).status.token


def _has_service_account(cluster, namespace: str, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        cluster.core.read_namespaced_service_account(name, namespace)
        return True
    except ApiException:
        return False


def _pod_view(js: dict) -> tuple[dict, str]:
    """The trainer container's env and the audience of its projected token, from the JobSet."""
    node_job = k8s.find_job(js["spec"], "node")
    pod = node_job["template"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kubeflow-trainer-token"]
    return env, volume["projected"]["sources"][0]["serviceAccountToken"]["audience"]


def test_training_code_reports_progress_with_the_sdk(cluster, runtime, tmp_path, monkeypatch):  # noqa: F811 (fixture)
    ns = cluster.namespace("progress")
    create(cluster, new_trainjob("tj", runtime, namespace=ns, suspend=True, nodes=1, per_node=EIGHT_GPUS))
    env, audience = _pod_view(cluster.wait(lambda: jobset(cluster, "tj", ns), what="the JobSet"))
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].endswith(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/tj/status")
    assert audience == f"trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/tj/status"

    # what the kubelet would mount at /var/run/secrets/kubeflow/trainer
    ca = tmp_path / "ca.crt"
    ca.write_text(cluster.core.read_namespaced_config_map("tj-tls-config", ns).data["ca.crt"])
    token = tmp_path / "token"
    token.write_text(_token(cluster, ns, audience))
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", env["KUBEFLOW_TRAINER_SERVER_URL"])
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_CA_CERT", str(ca))
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_TOKEN", str(token))

    from kubeflow.trainer import update_trainjob_status

    assert update_trainjob_status(progress_percent=42, estimated_remaining_seconds=60, metrics={"loss": 0.25}) is True
    reported = get(cluster, "trainjobs", "tj", ns)["status"]["trainerStatus"]
    assert reported["progressPercentage"] == 42 and reported["estimatedRemainingSeconds"] == 60
    assert reported["metrics"] == [{"name": "loss", "value": "0.25"}] and reported["lastUpdatedTime"]

    # the controller's own status writes (resume) leave the report alone
    cluster.kubectl("patch", "trainjob", "tj", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "tj", ns), "Suspended")) and c["reason"] == "Resumed",
                 what="the Resumed condition")
    assert get(cluster, "trainjobs", "tj", ns)["status"]["trainerStatus"] == reported

    url = env["KUBEFLOW_TRAINER_SERVER_URL"]

    def post(bearer: str, body: dict, target: str = url) -> requests.Response:
        return requests.post(target, json=body, headers={"Authorization": f"Bearer {bearer}"}, verify=str(ca), timeout=10)

    update = {"trainerStatus": {"progressPercentage": 50, "lastUpdatedTime": "2026-01-01T00:00:00Z"}}
    wrong_audience = _token(cluster, ns, "https://kubernetes.default.svc")
    assert post(wrong_audience, update).status_code == 403
    other_ns = cluster.namespace("intruder")
    intruder = post(_token(cluster, other_ns, audience), update)
    assert intruder.status_code == 403 and intruder.json()["reason"] == "Forbidden"
    no_time = post(token.read_text(), {"trainerStatus": {"progressPercentage": 50}})
    assert no_time.status_code == 422 and "lastUpdatedTime is required when trainerStatus is present" in no_time.json()["message"]
    assert post(token.read_text(), {"trainerStatus": "fast"}).json()["message"] == "Invalid payload"
    missing_url = url.replace("/trainjobs/tj/", "/trainjobs/ghost/")
    missing = post(_token(cluster, ns, audience.replace("/trainjobs/tj/", "/trainjobs/ghost/")), update, missing_url)
    assert missing.status_code == 404 and missing.json()["message"] == "Train job not found"
    assert post(token.read_text(), update).status_code == 200
    assert get(cluster, "trainjobs", "tj", ns)["status"]["trainerStatus"]["progressPercentage"] == 50


def test_the_checkpoint_helper_reads_asks_and_reports_checkpoints_through_the_status_server(cluster, runtime, tmp_path):  # noqa: F811
    """The training image's `trainyard_checkpoint` against the controller's real status server, with the pod's env,
    CA and token: no ask until reclaim annotates the TrainJob, then `due` says save; its report lands in
    trainerStatus, where reclaim reads the checkpoint (`scheduling.checkpoints`); another TrainJob's token is
    refused."""
    import datetime as dt

    from trainyard.scheduling.checkpoints import ask_outcome, last_checkpoint, SAVED, WAIT
    from trainyard.scheduling.reclaim import reclaimed_note
    from checkpoint_helper import helper

    ns = cluster.namespace("ckpt")
    create(cluster, new_trainjob("tj", runtime, namespace=ns, suspend=True, nodes=1, per_node=EIGHT_GPUS))
    env, audience = _pod_view(cluster.wait(lambda: jobset(cluster, "tj", ns), what="the JobSet"))
    ca = tmp_path / "ca.crt"
    ca.write_text(cluster.core.read_namespaced_config_map("tj-tls-config", ns).data["ca.crt"])
    token = tmp_path / "token"
    token.write_text(_token(cluster, ns, audience))
    trainyard_checkpoint = helper()
    server = trainyard_checkpoint.StatusServer({"KUBEFLOW_TRAINER_SERVER_URL": env["KUBEFLOW_TRAINER_SERVER_URL"],
                                                "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
                                                "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)})
    ckpt = trainyard_checkpoint.Checkpointer(directory=str(tmp_path / "ckpt"), every_steps=100, poll_s=0.0,
                                            server=server, handle_sigterm=False)
    assert server.asked() is None and ckpt.due(0) is False

    def ask(at: float) -> None:
        cluster.kubectl("annotate", "--overwrite", "trainjob", "tj", "-n", ns,
                        f"{k8s.CHECKPOINT_REQUESTED_ANNOTATION}={reclaimed_note(('other-team', 'gang'), at)}")

    asked_at = float(int(dt.datetime.now(dt.timezone.utc).timestamp()) - 1)
    ask(asked_at)
    assert server.asked() == dt.datetime.fromtimestamp(asked_at, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ckpt.due(1) is True and ckpt.asked and not ckpt.stopping
    assert ckpt.due(2) is False  # this ask is answered: it trains on until suspended
    cluster.kubectl("annotate", "trainjob", "tj", "-n", ns, f"{k8s.CHECKPOINT_REQUESTED_ANNOTATION}-")  # withdrawn
    assert ckpt.due(3) is False
    ask(asked_at + 5)  # a later ask (another gang's) is answered again
    assert ckpt.due(4) is True and ckpt.due(5) is False
    ask(asked_at)
    assert ask_outcome(asked_at, last_checkpoint(get(cluster, "trainjobs", "tj", ns)), asked_at + 1, 60) == WAIT

    server.report(trainyard_checkpoint.status_report(1, dt.datetime.now(dt.timezone.utc).timestamp(), progress=5))
    reported = last_checkpoint(get(cluster, "trainjobs", "tj", ns))
    assert reported is not None and reported.step == 1 and reported.at >= asked_at
    assert ask_outcome(asked_at, reported, asked_at + 1, 60) == SAVED

    other = trainyard_checkpoint.StatusServer({
        "KUBEFLOW_TRAINER_SERVER_URL": env["KUBEFLOW_TRAINER_SERVER_URL"].replace("/trainjobs/tj/", "/trainjobs/ghost/"),
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca), "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)})
    with pytest.raises(OSError, match="403"):  # this TrainJob's token names this TrainJob only
        other.asked()
