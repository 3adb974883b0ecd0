"""The kwok Stages of a timed cluster: upstream's defaults with pod-complete delayed by the pod's annotation."""

from pathlib import Path

import pytest
import yaml

from trainyard import k8s as K
from trainyard.cluster import kwok_stages as ks

ANNOTATION = f'.metadata.annotations["{K.KWOK_POD_COMPLETE_DELAY_ANNOTATION}"]'


def stage(name: str, *expressions: dict) -> dict:
    return {"apiVersion": f"{K.KWOK_STAGE_GROUP}/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                     "selector": {"matchExpressions": list(expressions)}, "next": {"statusTemplate": "phase: x"}}}


RUNNING = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
JOB_OWNED = {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]}


def upstream() -> dict[str, dict]:
    out = {name: stage(name) for name in ks.UPSTREAM_FILES}
    out["pod-complete"] = stage("pod-complete", RUNNING, JOB_OWNED)
    return out


def by_name(stages: list[dict]) -> dict[str, dict]:
    return {s["metadata"]["name"]: s for s in stages}


def test_every_default_stage_is_kept_and_pod_complete_waits_for_the_annotated_delay():
    stages = by_name(ks.timed_stages(upstream()))
    assert set(stages) == set(ks.UPSTREAM_FILES) | {ks.BARE_POD_COMPLETE}
    complete = stages["pod-complete"]["spec"]
    assert complete["delay"]["durationFrom"]["expressionFrom"] == ANNOTATION
    assert complete["delay"]["durationMilliseconds"] == 0  # no annotation: at once, as kwokctl's default
    assert "jitterDurationMilliseconds" not in complete["delay"]  # kwok would take a smaller jitter as the delay
    assert complete["selector"]["matchExpressions"] == [RUNNING, JOB_OWNED]
    assert stages["pod-ready"] == upstream()["pod-ready"]


def test_bare_pods_complete_only_when_annotated_and_unowned():
    bare = by_name(ks.timed_stages(upstream()))[ks.BARE_POD_COMPLETE]["spec"]
    assert bare["selector"]["matchExpressions"] == [
        RUNNING, {"key": ".metadata.ownerReferences", "operator": "DoesNotExist"},
        {"key": ANNOTATION, "operator": "Exists"}]
    assert bare["delay"] == ks.annotation_delay()


def test_the_input_is_not_modified():
    given = upstream()
    ks.timed_stages(given)
    assert given == upstream()


@pytest.mark.parametrize("drop, message", [("pod-delete", "missing: pod-delete"), (None, "Job owner")])
def test_unexpected_upstream_stages_are_refused(drop, message):
    given = upstream()
    if drop:
        given.pop(drop)
    else:
        given["pod-complete"] = stage("pod-complete", RUNNING)
    with pytest.raises(ValueError, match=message):
        ks.timed_stages(given)


def test_read_upstream_reads_every_file(tmp_path: Path):
    for name, path in ks.UPSTREAM_FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(yaml.safe_dump(stage(name)))
    assert ks.read_upstream(tmp_path) == {name: stage(name) for name in ks.UPSTREAM_FILES}
