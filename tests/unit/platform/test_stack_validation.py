"""Each bad stack input -> one error naming the stack file, the field path and the fix."""

import pytest

from trainyard.platform.problems import StackConfigError
from trainyard.platform.stack_config import parse_stack_config, stack_values
from trainyard.platform.stack_validation import load_stack

FILE = "stacks/Pulumi.test.yaml"


def _set(values, path, value):
    target = values
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


CASES = [
    ("duplicate tenant", ("tenants", 1, "name"), "team-a", "trainyard:tenants[1].name", "unique"),
    ("duplicate namespace", ("tenants", 1, "namespace"), "team-a", "trainyard:tenants[team-b].namespace", "unique"),
    ("duplicate queue", ("tenants", 1, "queue", "name"), "team-a", "trainyard:tenants[team-b].queue.name", "unique"),
    ("invalid name", ("tenants", 0, "name"), "Team_A", "trainyard:tenants[Team_A].name", "lowercase"),
    ("invalid namespace", ("tenants", 0, "namespace"), "team-a-" + "x" * 60, "trainyard:tenants[team-a].namespace", "63"),
    ("system namespace", ("tenants", 0, "namespace"), "kube-system", "trainyard:tenants[team-a].namespace", "own namespace"),
    ("reserved queue", ("tenants", 0, "queue", "name"), "default", "trainyard:tenants[team-a].queue.name", "after the tenant"),
    ("capability above quota", ("tenants", 0, "queue", "capability"), {"nvidia.com/gpu": 24},
     "trainyard:tenants[team-a].queue.capability[nvidia.com/gpu]", "raise quota.gpu"),
    ("capability above cluster", ("tenants", 0, "queue", "capability"), {"cpu": 1000},
     "trainyard:tenants[team-a].queue.capability[cpu]", "trainyard:cluster"),
    ("quota above cluster", ("tenants", 1, "quota", "gpu"), 64, "trainyard:tenants[team-b].quota.gpu", "cluster has"),
    ("unknown release", ("tenants", 0, "catalogVersion"), "7.0.0", "trainyard:tenants[team-a].catalogVersion", "pin one of"),
    ("retired release", ("tenants", 0, "catalogVersion"), "0.9.0", "trainyard:tenants[team-a].catalogVersion", "1.1.0"),
    ("draft release", ("tenants", 0, "catalogVersion"), "1.2.0", "trainyard:tenants[team-a].catalogVersion", "move the tenant"),
    ("unknown default priority class", ("tenants", 0, "defaultPriorityClass"), "urgent",
     "trainyard:tenants[team-a].defaultPriorityClass", "trainyard:priorityClasses"),
    ("unknown allowed priority class", ("tenants", 0, "priorityClasses"), ["urgent"],
     "trainyard:tenants[team-a].priorityClasses[0]", "declare it"),
    ("missing quota", ("tenants", 1, "quota"), None, "trainyard:tenants[team-b].quota", "add quota"),
    ("bad quantity", ("tenants", 1, "quota", "memory"), "lots", "trainyard:tenants[team-b].quota.memory", "512Gi"),
    ("bad capability quantity", ("tenants", 0, "queue", "capability"), {"cpu": "many"},
     "trainyard:tenants[team-a].queue.capability[cpu]", "512Gi"),
    ("missing cluster", ("cluster",), None, "trainyard:cluster", "add trainyard:cluster"),
    ("zero nodes", ("cluster", "nodes"), 0, "trainyard:cluster.nodes", "real count"),
    ("wrong type", ("cluster", "gpusPerNode"), "eight", "trainyard:cluster.gpusPerNode", "int"),
    ("unknown parent queue", ("tenants", 0, "queue", "parent"), "org", "trainyard:tenants[team-a].queue.parent", "declare it"),
    ("system priority class", ("priorityClasses", 0, "name"), "system-x", "trainyard:priorityClasses[system-x].name", "another name"),
    ("priority out of range", ("priorityClasses", 1, "value"), 2_000_000_000, "trainyard:priorityClasses[train-high].value", "between"),
    ("bad scheduler profile", ("scheduler",), {"profile": "fast"}, "trainyard:scheduler.profile", "allowed values"),
    ("no kube target", ("kubeContext",), None, "trainyard:kubeContext", "no ambient kubeconfig"),
    ("bad pod security", ("tenants", 0, "podSecurity"), "strict", "trainyard:tenants[team-a].podSecurity", "restricted"),
    ("node-loss release below -1", ("controller",), {"nodeLossReleaseAfterSeconds": -5},
     "trainyard:controller.nodeLossReleaseAfterSeconds", "-1 to never delete"),
    ("bad GPU device class", ("policies",), {"gpuDeviceClasses": ["gpu.nvidia.com", "GPU_Class"]},
     "trainyard:policies.gpuDeviceClasses[1]", "kubectl get deviceclasses"),
    ("GPU device classes not names", ("policies",), {"gpuDeviceClasses": "gpu.nvidia.com"},
     "trainyard:policies.gpuDeviceClasses", "list"),
    ("http webhook", ("controller",), {"webhook": {"url": "http://127.0.0.1:9443"}}, "trainyard:controller.webhook.url", "https"),
    ("in-cluster webhook without a certificate source", ("controller",), {"webhook": {}},
     "trainyard:controller.webhook.certificate", "`cert-manager`: cert-manager (a prerequisite"),
    ("unknown certificate source", ("controller", "webhook", "certificate"), "self-signed",
     "trainyard:controller.webhook.certificate", "`provided`: the operator creates Secret trainyard-webhook-cert"),
    ("provided certificate without its CA", ("controller", "webhook", "certificate"), "provided",
     "trainyard:controller.webhook.caBundleFile", "set caBundleFile"),
    ("certificate source with a URL webhook", ("controller", "webhook"),
     {"url": "https://127.0.0.1:9443", "certificate": "provided"}, "trainyard:controller.webhook.certificate",
     "remove it"),
    ("cert-manager with a CA file", ("controller", "webhook"), {"certificate": "cert-manager", "caBundleFile": "/ca"},
     "trainyard:controller.webhook.caBundleFile", "remove caBundleFile"),
    ("bad feature gate", ("controller",), {"featureGates": "TrainJobStatus=on"}, "trainyard:controller.featureGates",
     "TrainJobStatus=true"),
    ("bad sdk namespace", ("controller",), {"sdkNamespace": "Kubeflow"}, "trainyard:controller.sdkNamespace", "lowercase"),
    ("sdk namespace is a tenant's", ("controller",), {"sdkNamespace": "team-a"}, "trainyard:controller.sdkNamespace",
     "default kubeflow-system"),
    ("budget without gpuHours", ("tenants", 0, "budget"), {"action": "closeQueue"},
     "trainyard:tenants[team-a].budget.gpuHours", "set gpuHours"),
    ("budget of no GPU-hours", ("tenants", 0, "budget"), {"gpuHours": 0, "action": "closeQueue"},
     "trainyard:tenants[team-a].budget.gpuHours", "remove the budget"),
    ("budget period unknown", ("tenants", 0, "budget"), {"gpuHours": 10, "action": "closeQueue", "period": "daily"},
     "trainyard:tenants[team-a].budget.period", "weekly, monthly"),
    ("budget action unknown", ("tenants", 0, "budget"), {"gpuHours": 10, "action": "kill"},
     "trainyard:tenants[team-a].budget.action", "closeQueue, demotePriority"),
    ("budget demotion to nothing", ("tenants", 0, "budget"), {"gpuHours": 10, "action": "demotePriority"},
     "trainyard:tenants[team-a].budget.demoteTo", "train-default, train-high"),
    ("budget demotion upwards", ("tenants", 0, "budget"),
     {"gpuHours": 10, "action": "demotePriority", "demoteTo": "train-high"},
     "trainyard:tenants[team-a].budget.demoteTo", "lower value"),
    ("budget demotion to an unknown class", ("tenants", 0, "budget"),
     {"gpuHours": 10, "action": "demotePriority", "demoteTo": "scavenger"},
     "trainyard:tenants[team-a].budget.demoteTo", "declare it"),
    ("budget demoteTo without demotion", ("tenants", 0, "budget"),
     {"gpuHours": 10, "action": "closeQueue", "demoteTo": "train-default"},
     "trainyard:tenants[team-a].budget.demoteTo", "remove demoteTo"),
    ("budget gpuHours of text", ("tenants", 0, "budget"), {"gpuHours": "lots", "action": "closeQueue"},
     "trainyard:tenants[team-a].budget.gpuHours", "write a number"),
    ("budget with no Prometheus to measure it", ("tenants", 0, "budget"), {"gpuHours": 10, "action": "closeQueue"},
     "trainyard:tenants[team-a].budget", "set trainyard:controller.prometheusUrl"),
    ("prometheus url not a url", ("controller", "prometheusUrl"), "prometheus:9090",
     "trainyard:controller.prometheusUrl", "http://prometheus.monitoring.svc:9090"),
    ("unknown reclaim rule", ("controller", "reclaim"), "fair", "trainyard:controller.reclaim",
     "use one of none, deserved, final-share, fair-sharing"),
    ("reclaim without elastic queues", ("controller", "reclaim"), "fair-sharing", "trainyard:controller.reclaim",
     "set trainyard:scheduler.queuePlugin: capacity"),
    ("metrics auth over plain HTTP", ("controller", "metrics"), {"secureServing": False, "auth": True},
     "trainyard:controller.metrics.auth", "set controller.metrics.secureServing: true"),
]



@pytest.mark.parametrize("path,value,field,fix", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_file_field_and_fix(values, catalog, path, value, field, fix):
    if path == ("kubeContext",):
        values.pop("kubeconfig")
    _set(values, path, value)
    with pytest.raises(StackConfigError) as caught:
        load_stack(values, file=FILE, catalog=catalog)
    matching = [p for p in caught.value.problems if p.field == field]
    assert matching, f"no problem for {field}; got {[str(p) for p in caught.value.problems]}"
    assert all(p.file == FILE for p in caught.value.problems)
    assert any(fix in p.fix for p in matching), [p.fix for p in matching]
    assert FILE in str(caught.value) and field in str(caught.value)


def test_valid_stack_loads_and_defaults_queue_capability_to_quota(values, catalog):
    config = load_stack(values, file=FILE, catalog=catalog)
    team_b = config.tenants[1]
    assert team_b.queue.capability == {"cpu": 96, "memory": "512Gi", "nvidia.com/gpu": 8}
    assert team_b.groups.admins == ("team-b-admins",) and team_b.groups.users == ("team-b-users",)
    assert config.tenants[0].allowed_priority_classes == ("train-high", "train-default")


def test_all_problems_are_reported_together(values, catalog):
    values["tenants"][1]["name"] = "team-a"
    values["tenants"][0]["catalogVersion"] = "0.9.0"
    values["cluster"]["nodes"] = 0
    with pytest.raises(StackConfigError) as caught:
        load_stack(values, file=FILE, catalog=catalog)
    fields = {p.field for p in caught.value.problems}
    assert {"trainyard:tenants[1].name", "trainyard:tenants[0].catalogVersion", "trainyard:cluster.nodes"} <= fields


def test_proportion_refuses_hierarchy(values, catalog):
    values["queues"] = [{"name": "org"}]
    values["tenants"][0]["queue"]["parent"] = "org"
    with pytest.raises(StackConfigError, match="needs the capacity plugin"):
        load_stack(values, file=FILE, catalog=catalog)
    values["scheduler"] = {"queuePlugin": "capacity"}
    assert load_stack(values, file=FILE, catalog=catalog).scheduler.hierarchical_queues


def test_digest_policy_applies_to_controller_image(values, catalog):
    values["policies"] = {"requireImageDigest": True}
    with pytest.raises(StackConfigError, match="trainyard:controller.image"):
        load_stack(values, file=FILE, catalog=catalog)


def test_stack_values_strip_the_namespace():
    document = {"config": {"trainyard:tenants": [], "kubernetes:strictMode": "true", "trainyard:kubeContext": "x"}}
    assert stack_values(document) == {"tenants": [], "kubeContext": "x"}


def test_pulumi_string_booleans_are_accepted(values):
    values["controllersRunLocally"] = "true"
    config, problems = parse_stack_config(values, file=FILE)
    assert config.controllers_run_locally is True and problems == []


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_shipped_stacks_are_valid(stack):
    from pathlib import Path

    import yaml

    from trainyard.runtimes import load_catalog

    root = Path(__file__).resolve().parents[3]
    document = yaml.safe_load((root / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    config = load_stack(stack_values(document), file=f"stacks/Pulumi.{stack}.yaml", catalog=load_catalog())
    assert config.tenants
    assert config.controllers_run_locally is (stack == "local")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_controllers_run_locally_on_a_shared_stack_is_refused(tmp_path, stack):
    """Before: `controllersRunLocally: true` in prod sent `platform up --stack prod` to a local file backend with an
    empty passphrase, around the guard that asks shared environments for a backend."""
    from pathlib import Path

    from trainyard.platform.stack_validation import check_stack_file

    root = Path(__file__).resolve().parents[3]
    text = (root / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(text.replace("config:\n", 'config:\n  trainyard:controllersRunLocally: "true"\n', 1))
    problems = [p for p in check_stack_file(path, f"stacks/Pulumi.{stack}.yaml") if p.severity == "error"]
    assert [p.field for p in problems] == ["trainyard:controllersRunLocally"], [str(p) for p in problems]
    assert "is not a local cluster's" in problems[0].message and "remove controllersRunLocally" in problems[0].fix
    assert problems[0].line == text.splitlines().index("config:") + 2  # the inserted line


def test_a_budget_is_parsed_and_rendered_on_the_tenants_namespace(values, catalog):
    import json

    from trainyard.platform.stack_model import PolicySpec
    from trainyard.platform.tenant_objects import render_namespace

    values["priorityClasses"].append({"name": "scavenger", "value": 10})
    values["tenants"][0]["budget"] = {"gpuHours": 500, "action": "demotePriority", "demoteTo": "scavenger",
                                      "period": "weekly"}
    values["tenants"][1]["budget"] = {"gpuHours": 80.5, "action": "closeQueue"}
    values["controller"]["prometheusUrl"] = "http://prometheus.monitoring.svc:9090"
    config = load_stack(values, file=FILE, catalog=catalog)
    team_a, team_b = config.tenants
    assert (team_a.budget.gpu_hours, team_a.budget.period, team_a.budget.demote_to) == (500.0, "weekly", "scavenger")
    assert (team_b.budget.period, team_b.budget.action) == ("monthly", "closeQueue")  # monthly unless told
    annotation = render_namespace(team_b, PolicySpec())["metadata"]["annotations"]["trainyard.dev/budget"]
    assert json.loads(annotation) == {"gpuHours": 80.5, "period": "monthly", "action": "closeQueue"}


def test_the_in_cluster_controller_gets_the_prometheus_url_and_the_rights_budgets_need():
    from trainyard.platform import controller_objects as ctl
    from trainyard.platform.stack_model import ControllerSpec

    with_url = ControllerSpec(prometheus_url="http://prom:9090")
    command = ctl.render_controller_deployment(with_url)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--prometheus=http://prom:9090" in command
    rules = next(o for o in ctl.render_controller_rbac(with_url) if o["kind"] == "ClusterRole")["rules"]
    assert {"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]} in rules
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]} in rules
    plain = next(o for o in ctl.render_controller_rbac(ControllerSpec()) if o["kind"] == "ClusterRole")["rules"]
    assert not any("commands" in r["resources"] for r in plain), "no queue commands without budgets"
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]} in plain, \
        "the stall loop (on by default) records stalled TrainJobs on their namespace"
    quiet = ControllerSpec(stalled_after_minutes=0)
    rules = next(o for o in ctl.render_controller_rbac(quiet) if o["kind"] == "ClusterRole")["rules"]
    assert not any("patch" in r["verbs"] and r["resources"] == ["namespaces"] for r in rules)


def test_the_controller_runs_gang_reclaim_only_when_the_stack_asks_with_the_rights_it_needs():
    from trainyard.platform import controller_objects as ctl
    from trainyard.platform.stack_model import ControllerSpec

    def command_and_rules(spec):
        command = ctl.render_controller_deployment(spec)["spec"]["template"]["spec"]["containers"][0]["command"]
        rules = next(o for o in ctl.render_controller_rbac(spec) if o["kind"] == "ClusterRole")["rules"]
        return command, rules

    taints = {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["patch"]}
    command, rules = command_and_rules(ControllerSpec())
    assert not any(a.startswith("--reclaim") for a in command) and taints not in rules
    command, rules = command_and_rules(ControllerSpec(reclaim="fair-sharing"))
    assert "--reclaim=fair-sharing" in command and "--reclaim-holds" in command and taints in rules
    command, rules = command_and_rules(ControllerSpec(reclaim="final-share", reclaim_holds=False))
    assert "--reclaim=final-share" in command and "--no-reclaim-holds" in command and taints not in rules


def test_reclaim_with_elastic_queues_is_a_valid_stack(values, catalog):
    values["scheduler"] = {**values.get("scheduler", {}), "queuePlugin": "capacity"}
    values["controller"] = {**values.get("controller", {}), "reclaim": "fair-sharing", "reclaimHolds": False}
    config = load_stack(values, file=FILE, catalog=catalog)
    assert (config.controller.reclaim, config.controller.reclaim_holds) == ("fair-sharing", False)


def test_reclaim_on_a_stack_whose_controller_is_the_local_clusters_says_where_it_is_set(values, catalog):
    values["controllersRunLocally"] = "true"
    values["scheduler"] = {**values.get("scheduler", {}), "queuePlugin": "capacity"}
    values["controller"] = {**values.get("controller", {}), "reclaim": "fair-sharing"}
    with pytest.raises(StackConfigError) as caught:
        load_stack(values, file=FILE, catalog=catalog)
    problems = [p for p in caught.value.problems if p.field == "trainyard:controller.reclaim"]
    assert problems and "trainyard cluster up --reclaim fair-sharing" in problems[0].fix, caught.value.problems
