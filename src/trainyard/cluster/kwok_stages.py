"""kwok Stages for a cluster whose simulated pods run for a given time (`ClusterSpec.timed_pods`).

kwokctl loads its default Stages (node-initialize, node-heartbeat-with-lease and the fast pod stages
ready, complete, delete) only when its configuration holds no Stage at all, and the fast pod-complete
finishes a Job's pod the moment it runs. A timed cluster therefore passes all of them: upstream's own
files, read from the pinned kwok module, with pod-complete taking its delay from the pod's annotation
(none: at once, as before), plus one Stage that completes annotated pods no controller owns (a
benchmark's bare pods, which upstream never completes).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from trainyard.k8s import KWOK_POD_COMPLETE_DELAY_ANNOTATION

# Stage name -> file in the kwok module: what kwokctl v0.8.0 loads by default for the binary runtime
# (pkg/kwokctl/runtime/cluster.go getDefaultNodeStages/getDefaultPodStages).
UPSTREAM_FILES = {
    "node-initialize": "kustomize/stage/node/fast/node-initialize.yaml",
    "node-heartbeat-with-lease": "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod-ready": "kustomize/stage/pod/fast/pod-ready.yaml",
    "pod-complete": "kustomize/stage/pod/fast/pod-complete.yaml",
    "pod-delete": "kustomize/stage/pod/fast/pod-delete.yaml",
}
BARE_POD_COMPLETE = "pod-complete-bare"
_OWNER_KIND = ".metadata.ownerReferences.[].kind"


def read_upstream(module_dir: Path) -> dict[str, dict]:
    """The default Stages as the pinned module ships them."""
    return {name: yaml.safe_load((module_dir / path).read_text()) for name, path in UPSTREAM_FILES.items()}


def annotation_delay() -> dict:
    """A Stage delay read from the pod's annotation (a Go duration such as "90s"); 0 when absent."""
    return {"durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": f'.metadata.annotations["{KWOK_POD_COMPLETE_DELAY_ANNOTATION}"]'}}


def timed_stages(upstream: dict[str, dict]) -> list[dict]:
    """Every default Stage, pod-complete delayed by the annotation, and the bare-pod completion Stage."""
    missing = set(UPSTREAM_FILES) - set(upstream)
    if missing:
        raise ValueError(f"upstream Stages missing: {', '.join(sorted(missing))}")
    stages = [copy.deepcopy(upstream[name]) for name in UPSTREAM_FILES]
    complete = next(stage for stage in stages if stage["metadata"]["name"] == "pod-complete")
    complete["spec"]["delay"] = annotation_delay()
    bare = copy.deepcopy(complete)
    bare["metadata"]["name"] = BARE_POD_COMPLETE
    expressions = [e for e in bare["spec"]["selector"]["matchExpressions"] if e["key"] != _OWNER_KIND]
    if len(expressions) == len(bare["spec"]["selector"]["matchExpressions"]):
        raise ValueError("upstream pod-complete no longer selects pods by their Job owner")
    bare["spec"]["selector"]["matchExpressions"] = expressions + [
        {"key": ".metadata.ownerReferences", "operator": "DoesNotExist"},
        {"key": f'.metadata.annotations["{KWOK_POD_COMPLETE_DELAY_ANNOTATION}"]', "operator": "Exists"},
    ]
    return stages + [bare]
