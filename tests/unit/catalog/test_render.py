"""Rendering: templates -> objects, cluster runtimes of the current release, tenant runtimes of a pinned one."""

from __future__ import annotations

import pytest

from catalog_builders import TORCH_TEMPLATE, make_catalog, make_sources, make_tenant
from trainyard.runtimes import labels
from trainyard.runtimes.model import CatalogError, Release
from trainyard.runtimes.publish import (
    as_tenant_runtime,
    render_cluster_runtimes,
    render_release_runtimes,
    render_tenant_runtimes,
    render_tenants_runtimes,
)
from trainyard.runtimes.render import render_release_sources

CATALOG = make_catalog(
    Release("1.1.0", "current", "new"),
    Release("1.0.0", "deprecated", "old"),
    sources={
        "1.1.0": make_sources("1.1.0", values="images:\n  torch: pytorch/pytorch:2.13.0\n"),
        "1.0.0": make_sources("1.0.0", values="images:\n  torch: pytorch/pytorch:2.10.0\n"),
    },
)


def _image(runtime: dict) -> str:
    return runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"]


def _pod_specs(runtime: dict) -> list[dict]:
    return [job["template"]["spec"]["template"]["spec"] for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]]


@pytest.mark.parametrize(
    "tenant, want_image, want_deprecated",
    [
        (make_tenant(catalog_version="1.1.0"), "pytorch/pytorch:2.13.0", False),
        (make_tenant(name="team-b", namespace="team-b", queue="team-b", catalog_version="1.0.0"), "pytorch/pytorch:2.10.0", True),
    ],
    ids=["tenant on current release", "tenant on deprecated release"],
)
def test_tenant_runtimes_come_from_the_pinned_release(tenant, want_image, want_deprecated):
    (runtime,) = render_tenant_runtimes(CATALOG, tenant)
    assert runtime["kind"] == "TrainingRuntime"
    assert runtime["metadata"]["name"] == "torch-distributed"  # stable name across releases
    assert runtime["metadata"]["namespace"] == tenant.namespace
    assert runtime["metadata"]["labels"][labels.CATALOG_VERSION] == tenant.catalog_version
    assert (runtime["metadata"]["labels"].get(labels.SUPPORT) == "deprecated") is want_deprecated
    assert runtime["spec"]["template"]["metadata"]["annotations"][labels.VOLCANO_QUEUE] == tenant.queue
    assert runtime["spec"]["podGroupPolicy"] == {"volcano": {}}
    assert all(p["schedulerName"] == "volcano" and p["priorityClassName"] == tenant.priority_class for p in _pod_specs(runtime))
    assert _image(runtime) == want_image


def test_tenants_rendered_together_equal_each_rendered_alone_and_share_nothing():
    tenants = [make_tenant(catalog_version="1.1.0"),
               make_tenant(name="team-b", namespace="team-b", queue="team-b", catalog_version="1.0.0"),
               make_tenant(name="team-c", namespace="team-c", queue="team-c", catalog_version="1.1.0")]
    together = render_tenants_runtimes(CATALOG, tenants)
    assert together == {t.name: render_tenant_runtimes(CATALOG, t) for t in tenants}
    (a,), (c,) = together["team-a"], together["team-c"]
    a["spec"]["template"]["metadata"]["annotations"]["edited"] = "yes"  # a tenant's object is its own
    assert "edited" not in c["spec"]["template"]["metadata"]["annotations"]
    assert c["metadata"]["namespace"] == "team-c"


def test_cluster_runtimes_are_the_current_release_under_stable_names():
    (runtime,) = render_cluster_runtimes(CATALOG)
    assert runtime["kind"] == "ClusterTrainingRuntime"
    assert "namespace" not in runtime["metadata"]
    assert runtime["metadata"]["name"] == "torch-distributed"
    assert runtime["metadata"]["labels"][labels.CATALOG_VERSION] == "1.1.0"
    assert runtime["spec"]["template"]["metadata"]["labels"][labels.CATALOG_VERSION] == "1.1.0"
    assert labels.SUPPORT not in runtime["metadata"]["labels"]
    assert "podGroupPolicy" not in runtime["spec"] and "schedulerName" not in _pod_specs(runtime)[0]


@pytest.mark.parametrize(
    "policy, want",
    [
        (None, {"volcano": {}}),
        ({"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}, {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}),
    ],
    ids=["no policy gets volcano", "network topology kept"],
)
def test_tenant_form_keeps_or_adds_the_volcano_policy(policy, want):
    runtime = render_release_runtimes(CATALOG, "1.1.0")["torch-distributed"]
    if policy:
        runtime["spec"]["podGroupPolicy"] = policy
    assert as_tenant_runtime(runtime, make_tenant())["spec"]["podGroupPolicy"] == want


def test_tenant_without_priority_class_sets_none():
    runtime = as_tenant_runtime(render_release_runtimes(CATALOG, "1.1.0")["torch-distributed"], make_tenant(priority_class=None))
    assert "priorityClassName" not in _pod_specs(runtime)[0]


def test_tenant_form_rejects_coscheduling():
    runtime = render_release_runtimes(CATALOG, "1.1.0")["torch-distributed"]
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    with pytest.raises(CatalogError, match="coscheduling"):
        as_tenant_runtime(runtime, make_tenant())


@pytest.mark.parametrize("status", ["draft", "retired"])
def test_tenants_cannot_render_unreleased_or_retired_releases(status):
    catalog = make_catalog(Release("1.1.0", "current", "x"), Release("1.2.0", status, "x"), frozen=False)
    with pytest.raises(CatalogError, match=f"which is {status}"):
        render_tenant_runtimes(catalog, make_tenant(catalog_version="1.2.0"))


@pytest.mark.parametrize(
    "template, values, want_message, want_fix",
    [
        (TORCH_TEMPLATE.format(name="torch-distributed").replace("images.torch", "images.pytorch"), None, "unknown placeholder", "values.yaml"),
        (TORCH_TEMPLATE.format(name="torch-distributed").replace("    torch: {}", "    torch: {"), None, "invalid YAML", "indentation"),
        (TORCH_TEMPLATE.format(name="renamed"), None, "does not match the file name", "metadata.name: torch-distributed"),
        (TORCH_TEMPLATE.format(name="torch-distributed").replace("ClusterTrainingRuntime", "TrainingRuntime"), None, "kind ClusterTrainingRuntime", "ClusterTrainingRuntimes"),
        (TORCH_TEMPLATE.format(name="torch-distributed") + "---\nkind: Other\n", None, "exactly one object", "one runtime per file"),
        ("{% if %}", None, "template syntax error", "Jinja2"),
        (TORCH_TEMPLATE.format(name="torch-distributed"), "images: [unclosed", "invalid YAML", "YAML syntax"),
    ],
    ids=["unknown placeholder", "invalid YAML", "name differs from file", "wrong kind", "two documents", "jinja syntax", "bad values.yaml"],
)
def test_bad_templates_name_the_file_the_runtime_and_the_fix(template, values, want_message, want_fix):
    kwargs = {"values": values} if values is not None else {}
    sources = make_sources("1.2.0", {"torch-distributed": template}, **kwargs)
    with pytest.raises(CatalogError) as caught:
        render_release_sources(sources, "1.2.0")
    text = str(caught.value)
    assert want_message in text and want_fix in text
    assert "releases/1.2.0/" in text


def test_shipped_catalog_renders_every_upstream_runtime_with_pinned_images():
    from trainyard.runtimes.rules import check_images_pinned
    from trainyard.runtimes.store import load_catalog

    catalog = load_catalog()
    current = {r["metadata"]["name"]: r for r in render_cluster_runtimes(catalog)}
    upstream = {"torch-distributed", "deepspeed-distributed", "jax-distributed", "xgboost-distributed",
                "torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b"}
    ours = {"torch-distributed-cpu", "torch-distributed-gpu", "torch-distributed-volcano", "torch-distributed-topology",
            "openmpi-distributed", "intel-mpi-distributed", "mpich-distributed"}
    assert upstream | ours <= set(current)
    assert _image(current["torch-distributed"]) == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert current["torch-distributed-topology"]["spec"]["podGroupPolicy"]["volcano"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    for runtime in current.values():
        assert runtime["metadata"]["labels"][labels.FRAMEWORK]
        assert check_images_pinned(runtime) == []
    jobs = {j["name"]: j for j in current["torchtune-qwen2.5-1.5b"]["spec"]["template"]["spec"]["replicatedJobs"]}
    assert {n: j["template"]["metadata"]["labels"][labels.ANCESTOR_STEP] for n, j in jobs.items()} == {
        "dataset-initializer": "dataset-initializer", "model-initializer": "model-initializer", "node": "trainer"}


def test_platform_renderers_refuse_a_released_version_that_drifted():
    from dataclasses import replace

    edited = make_sources("1.0.0", values="images:\n  torch: pytorch/pytorch:9.9.9\n")
    catalog = replace(CATALOG, sources={**CATALOG.sources, "1.0.0": edited})
    with pytest.raises(CatalogError, match="file of a released version was edited"):
        render_tenant_runtimes(catalog, make_tenant(catalog_version="1.0.0"))
    assert render_tenant_runtimes(catalog, make_tenant(catalog_version="1.1.0"))  # other releases unaffected


@pytest.mark.parametrize("runtime,kept", [
    ("openmpi-distributed", {}),
    ("deepspeed-distributed", {}),
    ("mpich-distributed", {}),
    ("torchtune-llama3.2-1b", {"node": ["dataset-initializer", "model-initializer"]}),
])
def test_tenant_runtime_starts_a_ready_waiting_launcher_with_its_gang(runtime, kept):
    """A launcher that waits for its workers to be Ready cannot be in a Volcano gang that starts no worker until
    the launcher exists (minMember counts it): the tenant copy drops that wait, and keeps waits for Complete."""
    from trainyard.runtimes.store import load_catalog

    rendered = as_tenant_runtime(render_release_runtimes(load_catalog(), "1.2.0")[runtime], make_tenant())
    jobs = rendered["spec"]["template"]["spec"]["replicatedJobs"]
    waits = {job["name"]: [d["name"] for d in job["dependsOn"]] for job in jobs if "dependsOn" in job}
    assert waits == kept
    assert all(d["status"] == "Complete" for job in jobs for d in job.get("dependsOn", []))
    assert "volcano" in rendered["spec"]["podGroupPolicy"]
