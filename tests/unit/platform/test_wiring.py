"""Pulumi wiring with mocks: real invariants of what the program registers (skipped without pulumi)."""

import pytest

pulumi = pytest.importorskip("pulumi")
pytest.importorskip("pulumi_kubernetes")

FILE = "stacks/Pulumi.test.yaml"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "queues.scheduling.volcano.sh"}, "spec": {}}
RUNTIME = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
           "metadata": {"name": "torch-distributed"}, "spec": {}}


class Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.resources = []

    def new_resource(self, args):
        self.resources.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


def _run(values, catalog, monkeypatch):
    """Build the program under mocks and wait for every registration; returns what was registered."""
    from trainyard.platform.components import program
    from trainyard.platform.stack_validation import load_stack

    monkeypatch.setattr(program, "render_cluster_runtimes", lambda cat: [RUNTIME])
    monkeypatch.setattr(program, "render_tenants_runtimes", lambda cat, tenants: {t.name: [
        {**RUNTIME, "kind": "TrainingRuntime", "metadata": {"name": "torch-distributed", "namespace": t.namespace}}]
        for t in tenants})
    mocks, options, out = Mocks(), {}, {}
    pulumi.runtime.set_mocks(mocks, project="trainyard", stack="test", preview=False)

    def record(args):
        options[(args.type_, args.name)] = args.opts

    pulumi.runtime.register_stack_transformation(record)
    config = load_stack(values, file=FILE, catalog=catalog)

    @pulumi.runtime.test
    def go():
        out["components"] = program.build(config, catalog, {
            "crds": [CRD], "volcano_policies": [], "jobset_chart": None, "volcano_chart": None})
        return pulumi.Output.all(*[t.urn for t in out["components"]["tenants"].values()])

    go()
    return config, out["components"], mocks.resources, options


def _of(resources, kind):
    return [r for r in resources if r.typ == f"kubernetes:{kind}"]


def test_every_tenant_gets_quota_queue_rbac_and_guard(values, catalog, monkeypatch):
    from trainyard.platform.policy_pack.checks import tenant_coverage_violations

    values.update(controllersRunLocally=True, kubeContext="kwok-test")
    _, _, resources, _ = _run(values, catalog, monkeypatch)
    assert tenant_coverage_violations([(r.typ, r.inputs) for r in resources]) == []
    assert {"team-a", "team-b"} <= {r.inputs["metadata"]["name"] for r in _of(resources, "core/v1:Namespace")}
    assert {q.inputs["metadata"]["name"] for q in _of(resources, "scheduling.volcano.sh/v1beta1:Queue")} == {"team-a", "team-b"}
    assert _of(resources, "apps/v1:Deployment") == []  # local: controllers run as processes
    configmaps = {c.inputs["metadata"]["name"]: c for c in _of(resources, "core/v1:ConfigMap")}
    assert set(configmaps) == {"volcano-scheduler-configmap", "kubeflow-trainer-public"}
    assert "volcano-scheduler.conf" in configmaps["volcano-scheduler-configmap"].inputs["data"]
    assert configmaps["kubeflow-trainer-public"].inputs["metadata"]["namespace"] == "kubeflow-system"
    runtimes = _of(resources, "trainer.kubeflow.org/v1alpha1:TrainingRuntime")
    assert {r.inputs["metadata"]["namespace"] for r in runtimes} == {"team-a", "team-b"}


def test_tenant_quotas_are_awaited_until_every_limit_has_a_usage(values, catalog, monkeypatch):
    """Else a TrainJob created right after `up` is refused: "status unknown for quota" (the suite saw it)."""
    import json

    _, _, resources, _ = _run(values, catalog, monkeypatch)
    quotas = _of(resources, "core/v1:ResourceQuota")
    assert quotas
    for quota in quotas:
        wait_for = json.loads(quota.inputs["metadata"]["annotations"]["pulumi.com/waitFor"])
        assert wait_for == [f"jsonpath={{.status.used['{key}']}}" for key in sorted(quota.inputs["spec"]["hard"])]
    hard = next(q for q in quotas if q.inputs["metadata"]["name"] == "tenant-quota").inputs["spec"]["hard"]
    assert "requests.nvidia.com/gpu" in hard and "count/trainjobs.trainer.kubeflow.org" in hard


def test_crds_first_tenants_after_controller_and_protected_crds(values, catalog, monkeypatch):
    config, components, resources, options = _run(values, catalog, monkeypatch)
    crds = components["crds"]
    top_level = {key: opts for key, opts in options.items() if key[0].startswith("trainyard:") and opts.parent is None}
    assert {name for _, name in top_level} >= {"crds", "jobset", "volcano", "scheduling", "controller", "guardrails",
                                              "catalog", "team-a", "team-b"}
    for (typ, name), opts in top_level.items():
        if name != "crds":
            assert crds in opts.depends_on, name
        if typ == "trainyard:tenants:Tenant":
            assert components["controller"] in opts.depends_on and components["catalog"] not in opts.depends_on
    crd_opts = [opts for (typ, _), opts in options.items() if typ.endswith(":CustomResourceDefinition")]
    assert crd_opts and all(opts.parent is crds and opts.protect for opts in crd_opts)
    guards = [opts for (typ, _), opts in options.items() if typ.endswith(":ValidatingAdmissionPolicyBinding")]
    assert len(guards) == 2 and all(components["guardrails"].queue_guard in o.depends_on for o in guards)
    (deployment,) = _of(resources, "apps/v1:Deployment")
    assert deployment.inputs["spec"]["replicas"] == config.controller.replicas
    assert all("*" not in v for r in _of(resources, "rbac.authorization.k8s.io/v1:ClusterRole")
               for rule in r.inputs["rules"] for v in rule.values())
