"""``catalog lint`` catches each kind of bad runtime, naming file, runtime and fix."""

from __future__ import annotations

import copy
import sys
from dataclasses import replace

import pytest

from catalog_builders import CHECKS, SHIPPED, TORCH_TEMPLATE, make_catalog, make_sources, make_tenant
from trainyard.controller.admission import validate_runtime
from trainyard.runtimes.lint import errors, lint_catalog, lint_pins, lint_release, load_controller_checks, runtime_schemas
from trainyard.runtimes.model import CatalogError, Release
from trainyard.runtimes.publish import render_release_runtimes
from trainyard.platform.catalog_tenants import load_stack_tenants
from trainyard.runtimes.store import load_catalog

GOOD = TORCH_TEMPLATE.format(name="torch-distributed")
NODE = "                    - name: node\n"
INITIALIZER = """\
        - name: dataset-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                spec:
                  containers:
                    - name: {container}
                      image: {{{{ images.torch }}}}
"""


def _with_initializer(container: str) -> str:
    return GOOD.replace("      replicatedJobs:\n", "      replicatedJobs:\n" + INITIALIZER.format(container=container))


def _lint(template: str, values: str = "images:\n  torch: pytorch/pytorch:2.13.0\n", checks=CHECKS):
    catalog = make_catalog(Release("1.1.0", "current", "x"), Release("1.2.0", "draft", "x"), frozen=True)
    catalog = replace(catalog, sources={**catalog.sources, "1.2.0": make_sources("1.2.0", {"torch-distributed": template}, values)})
    return errors(lint_release(catalog, "1.2.0", checks))


def test_good_runtime_is_clean():
    assert _lint(GOOD) == []
    assert _lint(_with_initializer("dataset-initializer")) == []


def test_checks_are_the_real_controller():
    assert CHECKS.validate_runtime is validate_runtime
    assert CHECKS.build_objects.__module__ == "trainyard.controller.build"
    assert set(CHECKS.schemas) == {"ClusterTrainingRuntime", "TrainingRuntime"}


@pytest.mark.parametrize(
    "template, values, want_message, want_fix",
    [
        (GOOD.replace("    trainer.kubeflow.org/framework: torch\n", "    team: ml\n"), None, "missing label trainer.kubeflow.org/framework", "framework"),
        (GOOD, "images:\n  torch: pytorch/pytorch\n", "image 'pytorch/pytorch' has no tag", "pin the image"),
        (GOOD, "images:\n  torch: pytorch/pytorch:latest\n", "is tagged latest", "pin the image"),
        (GOOD.replace("trainjob-ancestor-step: trainer", "trainjob-ancestor-step: trainr"), None, "unknown ancestor step 'trainr'", "use one of"),
        (
            GOOD.replace("            metadata:\n              labels:\n                trainer.kubeflow.org/trainjob-ancestor-step: trainer\n", "")
            .replace("              template:\n                spec:\n", "              template:\n                metadata:\n                  labels:\n                    trainer.kubeflow.org/trainjob-ancestor-step: trainer\n                spec:\n"),
            None,
            "is on the pod template",
            "replicatedJobs[].template.metadata.labels",
        ),
        (GOOD.replace("numNodes: 1", "numNodes: -1"), None, "CRD schema: spec.mlPolicy.numNodes: must be greater than or equal to 0", "runtime CRD"),
        (GOOD.replace("    torch: {}", "    torch: {}\n    pytorch: {}"), None, "CRD schema: spec.mlPolicy.pytorch: unknown field", "runtime CRD"),
        (GOOD.replace("numNodes: 1", "numNodes: two"), None, "CRD schema: spec.mlPolicy.numNodes: must be an integer, got string", "runtime CRD"),
        (
            GOOD.replace("    torch: {}", "    mpi:\n      mpiImplementation: MPICH2"),
            None,
            "CRD schema: spec.mlPolicy.mpi.mpiImplementation: Unsupported value 'MPICH2'",
            "runtime CRD",
        ),
        (GOOD.replace("    torch: {}", "    torch: {}\n    mpi: {}"), None, "admission: spec.mlPolicy: Invalid value: {...}: Only one of the policy can be configured", "webhook"),
        (GOOD.replace("replicatedJobs:\n        - name: node\n", "replicatedJobs:\n        - name: node\n          replicas: 2\n"), None, "admission: spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1", "webhook"),
        (GOOD.replace("replicatedJobs:\n        - name: node\n", "replicatedJobs:\n        - name: node-with-a-long-name\n"), None, "admission: spec.template.spec.replicatedJobs[0].name: Invalid value: \"node-with-a-long-name\": must be no more than 20 characters", "webhook"),
        (GOOD.replace(NODE, "                    - name: trainer\n"), None, "admission: spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: [...]: must contain the required container for the ancestor: trainer", "webhook"),
        (_with_initializer("init"), None, "admission: spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: [...]: must contain the required container for the ancestor: dataset-initializer", "webhook"),
        (GOOD.replace("    numNodes: 1\n", "").replace("    torch: {}", "    torch:\n      elasticPolicy:\n        minNodes: 1\n        metrics:\n          - type: Resource"), None,
         "sample TrainJob failed to build: BuildError: mlPolicy.torch.elasticPolicy.metrics: autoscaling on metrics is not supported", "JobSet"),
    ],
    ids=[
        "no framework label",
        "untagged image",
        "latest image",
        "unknown ancestor",
        "ancestor on pod template",
        "schema bound",
        "unknown field",
        "wrong type",
        "unknown enum",
        "two ML policies",
        "ancestor replicas",
        "replicated job name over 20 characters",
        "required container",
        "initializer container",
        "build fails",
    ],
)
def test_lint_catches_bad_runtimes(template, values, want_message, want_fix):
    findings = _lint(template, **({"values": values} if values else {}))
    assert findings, "expected a finding"
    first = findings[0]
    assert want_message in first.message and want_fix in first.fix
    assert (first.file, first.runtime, first.release) == ("releases/1.2.0/torch-distributed.yaml.j2", "torch-distributed", "1.2.0")


def test_lint_reports_render_errors_as_findings():
    (finding,) = _lint(GOOD.replace("images.torch", "images.missing"))
    assert "unknown placeholder" in finding.message and finding.file == "releases/1.2.0/torch-distributed.yaml.j2"


def test_lint_checks_the_tenant_form_builds_a_podgroup_in_the_queue():
    built = []

    def build_without_podgroup(trainjob, runtime, existing=(), **options):
        """Fault injection: the real build, with its PodGroup dropped."""
        objects = CHECKS.build_objects(trainjob, runtime, existing, **options)
        built.append([o["kind"] for o in objects])
        return [o for o in objects if o["kind"] != "PodGroup"]

    (finding,) = _lint(GOOD, checks=replace(CHECKS, build_objects=build_without_podgroup))
    assert finding.message.startswith("as TrainingRuntime: tenant form did not build a Volcano PodGroup in queue 'catalog-lint'")
    cluster_form, tenant_form = built
    assert "PodGroup" not in cluster_form and tenant_form.count("PodGroup") == 1  # the real build made the tenant's PodGroup


@pytest.mark.parametrize("module", ["trainyard.controller.crds", "trainyard.controller.admission", "trainyard.controller.build"])
def test_load_controller_checks_fails_loudly_without_the_controller(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(CatalogError) as raised:
        load_controller_checks()
    (finding,) = raised.value.findings
    assert "catalog lint needs trainyard.controller" in finding.message and module in finding.message
    assert "pip install -e ." in finding.fix


def test_lint_catalog_covers_drift_pins_and_skips_retired():
    catalog = make_catalog(Release("1.1.0", "current", "x"), Release("1.0.0", "retired", "x"), Release("0.9.0", "supported", "x", ("nope",)))
    tampered_lock = {**catalog.lock, "releases": {**catalog.lock["releases"], "1.0.0": {"runtimes": {}, "sources": {}}}}
    seen = []

    def recording_admission(runtime, old=None):
        seen.append(runtime["metadata"]["labels"]["trainyard.dev/catalog-version"])
        return CHECKS.validate_runtime(runtime, old)

    checks = replace(CHECKS, validate_runtime=recording_admission)
    stacks = {"local": [make_tenant(catalog_version="1.0.0")]}
    messages = [f.message for f in errors(lint_catalog(replace(catalog, lock=tampered_lock), stacks, checks))]
    assert "file added to a released version" in messages  # retired sources are still frozen
    assert "deprecatedRuntimes lists 'nope', which release 0.9.0 does not have" in messages
    assert "tenant team-a pins 1.0.0, which is retired" in messages
    assert "1.0.0" not in seen and {"1.1.0", "0.9.0"} <= set(seen)  # retired runtimes are not linted


@pytest.mark.parametrize(
    "version, want_severity",
    [("1.1.0", None), ("0.9.0", "warning"), ("2.0.0", "error"), ("1.2.0", "error")],
    ids=["current", "deprecated", "unknown", "draft"],
)
def test_lint_pins(version, want_severity):
    catalog = make_catalog(Release("1.2.0", "draft", "x"), Release("1.1.0", "current", "x"), Release("0.9.0", "deprecated", "x"), frozen=False)
    findings = lint_pins(catalog, {"local": [make_tenant(catalog_version=version)]})
    assert [f.severity for f in findings] == ([want_severity] if want_severity else [])
    assert all(f.file == "stacks/Pulumi.local.yaml" and "catalogVersion: 1.1.0" in f.fix for f in findings)


def test_runtime_schemas_pick_the_runtime_crds():
    crd = lambda kind, group="trainer.kubeflow.org": {  # noqa: E731
        "spec": {"group": group, "names": {"kind": kind}, "versions": [{"name": "v1alpha1", "schema": {"openAPIV3Schema": {"title": kind}}}]}
    }
    schemas = runtime_schemas([crd("TrainJob"), crd("TrainingRuntime"), crd("ClusterTrainingRuntime"), crd("ClusterTrainingRuntime", "other.io")])
    assert schemas == {"TrainingRuntime": {"title": "TrainingRuntime"}, "ClusterTrainingRuntime": {"title": "ClusterTrainingRuntime"}}


@pytest.mark.parametrize(
    "mutate, want",
    [
        (lambda jobs: jobs[0].__setitem__("replicas", 2), "must be 1"),
        (lambda jobs: jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0].__setitem__("name", "trainer"), "required container"),
    ],
    ids=["ancestor replicas", "required container"],
)
def test_real_controller_admission_rejects_bad_runtimes(mutate, want):
    catalog = make_catalog(Release("1.1.0", "current", "x"))
    runtime = copy.deepcopy(render_release_runtimes(catalog, "1.1.0")["torch-distributed"])
    assert list(validate_runtime(runtime).errors) == []
    mutate(runtime["spec"]["template"]["spec"]["replicatedJobs"])
    assert any(want in str(e) for e in validate_runtime(runtime).errors)


def _depends_on_max_items() -> int:
    schema = CHECKS.schemas["ClusterTrainingRuntime"]
    for key in ("spec", "template", "spec", "replicatedJobs"):
        schema = schema["properties"][key] if key != "replicatedJobs" else schema["properties"][key]["items"]
    return schema["properties"].get("dependsOn", {}).get("maxItems", 5)


def test_shipped_catalog_passes_the_real_controller_lint():
    """Schema, admission and a sample build through trainyard.controller, for every live runtime."""
    assert _depends_on_max_items() >= 2, "torchtune runtimes depend on two initializers"
    findings = lint_catalog(load_catalog(SHIPPED), load_stack_tenants(SHIPPED.parent / "stacks"), CHECKS)
    assert [str(f) for f in errors(findings)] == []


def _limits(limits: str) -> str:
    return GOOD + "                      resources:\n                        limits:\n" + "".join(
        f"                          {line}\n" for line in limits.splitlines())


@pytest.mark.parametrize("limits, describable", [
    ("memory: 8Gi", False),
    ("memory: 8Gi\ncpu: 2", True),
    ("nvidia.com/gpu: 8", True),
    ("nvidia.com/mig-1g.10gb: 1", True),
    ("example.com/fpga: 1", False),
])
def test_lint_requires_limits_the_kubeflow_sdk_can_describe(limits, describable):
    findings = _lint(_limits(limits))
    sdk = [f for f in findings if "Kubeflow SDK" in f.message]
    assert bool(sdk) is not describable
    if sdk:
        assert "TrainerClient.list_runtimes() fails" in sdk[0].message and "cpu (or accelerator) limit" in sdk[0].fix


def test_sdk_finding_is_only_a_warning_in_a_frozen_release():
    catalog = make_catalog(Release("1.1.0", "current", "x"), frozen=True)
    catalog = replace(catalog, sources={"1.1.0": make_sources("1.1.0", {"torch-distributed": _limits("memory: 8Gi")})})
    findings = [f for f in lint_release(catalog, "1.1.0", CHECKS) if "Kubeflow SDK" in f.message]
    assert [f.severity for f in findings] == ["warning"]
