"""Strict stack config: each broken stack -> one error naming the tenant, the field and the fix (issue 14.1).

Every case starts from conftest's valid stack (`values`) and breaks it in one place; the assertion is on the
field path and the message, so a silently accepted key or quantity fails here.
"""

from pathlib import Path

import pytest
import yaml

from trainyard.platform.problems import WARNING, errors_of
from trainyard.platform.stack_source import field_path, parse_stack_source
from trainyard.platform.stack_validation import check_stack

FILE = "stacks/Pulumi.test.yaml"


def _tenant(values, name):
    return next(t for t in values["tenants"] if t["name"] == name)


def _pop(mapping, key):
    mapping.pop(key)


# (id, edit(values), field, message substring, fix substring)
CASES = [
    ("typo'd top-level tenants", lambda v: v.update(tenant=v.pop("tenants")), "trainyard:tenant",
     "unknown key", "did you mean 'tenants'"),
    ("unknown top-level key", lambda v: v.update(clusterSize=4), "trainyard:clusterSize", "unknown key", "known:"),
    ("typo'd defaultPriorityClass", lambda v: _tenant(v, "team-a").update(
        defaultPriorityClas=_tenant(v, "team-a").pop("defaultPriorityClass")),
     "trainyard:tenants[team-a].defaultPriorityClas", "unknown key", "did you mean 'defaultPriorityClass'"),
    ("unknown resource name", lambda v: _tenant(v, "team-a")["queue"].update(capability={"nvidia.com/gpus": 16}),
     "trainyard:tenants[team-a].queue.capability[nvidia.com/gpus]", "unknown resource name",
     "did you mean 'nvidia.com/gpu'"),
    ("negative quota cpu", lambda v: _tenant(v, "team-b")["quota"].update(cpu=-192),
     "trainyard:tenants[team-b].quota.cpu", "-192 must be above zero", "real amount"),
    ("negative quota gpu", lambda v: _tenant(v, "team-b")["quota"].update(gpu=-4),
     "trainyard:tenants[team-b].quota.gpu", "-4 is below 0", "use 0 or more"),
    ("negative trainJobs", lambda v: _tenant(v, "team-b")["quota"].update(trainJobs=-5),
     "trainyard:tenants[team-b].quota.trainJobs", "-5 is below 1", "use 1 or more"),
    ("zero memory quota", lambda v: _tenant(v, "team-b")["quota"].update(memory="0Gi"),
     "trainyard:tenants[team-b].quota.memory", "must be above zero", "512Gi"),
    ("negative capability", lambda v: _tenant(v, "team-a")["queue"].update(capability={"nvidia.com/gpu": -8}),
     "trainyard:tenants[team-a].queue.capability[nvidia.com/gpu]", "must be at least zero", "real amount"),
    ("fractional GPU capability", lambda v: _tenant(v, "team-a")["queue"].update(capability={"nvidia.com/gpu": "0.5"}),
     "trainyard:tenants[team-a].queue.capability[nvidia.com/gpu]", "not a whole number", "whole units"),
    ("bad deserved quantity", lambda v: _tenant(v, "team-a")["queue"].update(deserved={"memory": "8GB"}),
     "trainyard:tenants[team-a].queue.deserved[memory]", "'8GB' is not a Kubernetes quantity", "512Gi"),
    ("unknown quota key", lambda v: _tenant(v, "team-a")["quota"].update(gpus=16),
     "trainyard:tenants[team-a].quota.gpus", "unknown key", "did you mean 'gpu'"),
    ("unknown queue key", lambda v: _tenant(v, "team-a")["queue"].update(capacity={"cpu": 1}),
     "trainyard:tenants[team-a].queue.capacity", "unknown key", "did you mean 'capability'"),
    ("unknown limits key", lambda v: _tenant(v, "team-a").update(limits={"defaultCPU": "2"}),
     "trainyard:tenants[team-a].limits.defaultCPU", "unknown key", "did you mean 'defaultCpu'"),
    ("bad default memory", lambda v: _tenant(v, "team-a").update(limits={"defaultMemory": "4 GiB"}),
     "trainyard:tenants[team-a].limits.defaultMemory", "not a Kubernetes quantity", "512Gi"),
    ("unknown groups key", lambda v: _tenant(v, "team-a").update(groups={"admin": ["x"]}),
     "trainyard:tenants[team-a].groups.admin", "unknown key", "did you mean 'admins'"),
    ("unknown networkPolicy key", lambda v: _tenant(v, "team-a").update(networkPolicy={"deny": True}),
     "trainyard:tenants[team-a].networkPolicy.deny", "unknown key", "did you mean 'defaultDeny'"),
    ("unknown cluster key", lambda v: v["cluster"].update(gpuPerNode=8), "trainyard:cluster.gpuPerNode",
     "unknown key", "did you mean 'gpusPerNode'"),
    ("negative cpu per node", lambda v: v["cluster"].update(cpuPerNode=-96), "trainyard:cluster.cpuPerNode",
     "not a positive quantity", "96"),
    ("unknown scheduler key", lambda v: v.update(scheduler={"profiles": "gang"}), "trainyard:scheduler.profiles",
     "unknown key", "did you mean 'profile'"),
    ("unknown topology key", lambda v: v.update(topology={"rack": "x"}), "trainyard:topology.rack",
     "unknown key", "did you mean 'racks'"),
    ("unknown rack key", lambda v: v.update(topology={"racks": [{"name": "r1", "spines": "s"}]}),
     "trainyard:topology.racks[r1].spines", "unknown key", "did you mean 'spine'"),
    ("unknown priority class key", lambda v: v["priorityClasses"][0].update(preemption="Never"),
     "trainyard:priorityClasses[train-default].preemption", "unknown key", "did you mean 'preemptionPolicy'"),
    ("unknown controller key", lambda v: v["controller"].update(replica=2), "trainyard:controller.replica",
     "unknown key", "did you mean 'replicas'"),
    ("unknown webhook key", lambda v: v["controller"]["webhook"].update(failurepolicy="Fail"),
     "trainyard:controller.webhook.failurepolicy", "unknown key", "did you mean 'failurePolicy'"),
    ("unknown upstream key", lambda v: v.update(upstream={"jobsetimage": "x"}), "trainyard:upstream.jobsetimage",
     "unknown key", "did you mean 'jobsetImage'"),
    ("unknown policies key", lambda v: v.update(policies={"podsecurity": "baseline"}),
     "trainyard:policies.podsecurity", "unknown key", "did you mean 'podSecurity'"),
    ("unknown parent queue key", lambda v: v.update(queues=[{"name": "org", "weigth": 2}]),
     "trainyard:queues[org].weigth", "unknown key", "did you mean 'weight'"),
    ("tenant entry not a mapping", lambda v: v["tenants"].append("team-c"), "trainyard:tenants[2]",
     "must be a mapping", "key: value"),
    ("quota not a mapping", lambda v: _tenant(v, "team-a").update(quota=[16]), "trainyard:tenants[team-a].quota",
     "must be a mapping", "key: value"),
    ("boolean gpu quota", lambda v: _tenant(v, "team-b")["quota"].update(gpu=True),
     "trainyard:tenants[team-b].quota.gpu", "must be int", "write a int"),
    ("oversubscription refused by policy", lambda v: (v.update(policies={"refuseQuotaOversubscription": True}),
                                                      _tenant(v, "team-b")["quota"].update(gpu=24)),
     "trainyard:tenants", "quota.gpu sums to 40 of the cluster's 32", "at most 32 in total"),
    ("duplicate rack names", lambda v: v.update(topology={"racks": [{"name": "r1"}, {"name": "r1", "spine": "s2"}]}),
     "trainyard:topology.racks[1].name", "rack 'r1' is already declared at trainyard:topology.racks[0].name",
     "unique name"),
    ("a node in two racks", lambda v: v.update(topology={"racks": [{"name": "r1", "nodes": ["n0"]},
                                                                   {"name": "r2", "nodes": ["n0"]}]}),
     "trainyard:topology.racks[r2].nodes", "rack member node 'n0' is already declared", "unique name"),
    ("empty user name in a group", lambda v: _tenant(v, "team-a").update(groups={"users": ["team-a-users", ""]}),
     "trainyard:tenants[team-a].groups.users[1]", "'' is not a usable name", "without surrounding spaces"),
    ("padded admin group", lambda v: _tenant(v, "team-a").update(groups={"admins": [" ops"]}),
     "trainyard:tenants[team-a].groups.admins[0]", "' ops' is not a usable name", "without surrounding spaces"),
    ("group listed twice", lambda v: _tenant(v, "team-a").update(groups={"users": ["u", "u"]}),
     "trainyard:tenants[team-a].groups.users[1]", "'u' is listed twice", "remove the duplicate"),
    ("policy flag of the wrong type", lambda v: v.update(policies={"refuseQuotaOversubscription": "yes"}),
     "trainyard:policies.refuseQuotaOversubscription", "must be bool", "write a bool"),
]


@pytest.mark.parametrize("edit,field,message,fix", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_stack_is_refused_naming_the_field(values, catalog, edit, field, message, fix):
    edit(values)
    _, problems = check_stack(values, file=FILE, catalog=catalog)
    matching = [p for p in errors_of(problems) if p.field == field]
    assert matching, f"no error for {field}; got {[str(p) for p in problems]}"
    assert any(message in p.message and fix in p.fix for p in matching), [str(p) for p in matching]


def test_at_least_thirty_broken_stacks_plus_the_existing_table():
    assert len(CASES) >= 30


def test_typo_of_tenants_does_not_leave_an_empty_tenant_list_unnoticed(values, catalog):
    values["tenant"] = values.pop("tenants")
    config, problems = check_stack(values, file=FILE, catalog=catalog)
    assert config.tenants == () and errors_of(problems)


def test_quota_oversubscription_is_a_warning_by_default(values, catalog):
    values["controller"]["webhook"]["clientCaFile"] = "/etc/trainyard/webhook-client-ca.crt"  # no other warning
    _tenant(values, "team-b")["quota"]["gpu"] = 24
    _, problems = check_stack(values, file=FILE, catalog=catalog)
    assert [p.severity for p in problems] == [WARNING]
    assert "quota.gpu sums to 40 of the cluster's 32 (team-a 16, team-b 24)" in problems[0].message
    assert "refuseQuotaOversubscription: true makes this an error" in problems[0].fix


STACK_TEXT = """\
config:
  kubernetes:strictMode: "true"
  trainyard:kubeconfig: /tmp/kubeconfig
  trainyard:kubeContext: test
  trainyard:controller:
    webhook: {certificate: cert-manager, clientCaFile: /etc/trainyard/webhook-client-ca.crt}
  trainyard:cluster: {nodes: 4, gpusPerNode: 8, cpuPerNode: 96, memoryPerNode: 1024Gi}
  trainyard:tenants:
    - name: team-a
      catalogVersion: 1.1.0
      queue: {name: team-a}
      quota:
        cpu: 96
        memory: 512Gi
        gpu: -4
  trainyard:tenant: []
"""


def test_problems_carry_the_file_line():
    source = parse_stack_source(STACK_TEXT, "stacks/Pulumi.x.yaml")
    _, problems = check_stack(source.values, file=source.file, lines=source.lines)
    where = {p.field: str(p).split(": ")[0] for p in problems}
    assert where["trainyard:tenants[team-a].quota.gpu"] == "stacks/Pulumi.x.yaml:15"
    assert where["trainyard:tenant"] == "stacks/Pulumi.x.yaml:16"


def test_field_paths_split_on_brackets_not_on_dots_inside_them():
    assert field_path("trainyard:tenants[team-a].queue.capability[nvidia.com/gpu]") == (
        "trainyard:tenants", "team-a", "queue", "capability", "nvidia.com/gpu")


def _stack_root(tmp_path: Path, text: str) -> Path:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.x.yaml").write_text(text)
    return tmp_path


def test_platform_validate_prints_problems_with_lines_and_fails(tmp_path):
    from trainyard.stack_deploy import validate as validate_stack

    lines: list[str] = []
    code = validate_stack("x", echo=lines.append, root=_stack_root(tmp_path, STACK_TEXT))
    assert code == 1
    text = "\n".join(lines)
    assert "error: stacks/Pulumi.x.yaml:16: trainyard:tenant: unknown key" in text
    assert "did you mean 'tenants'" in text and lines[-1].endswith("error(s), 0 warning(s)")


def test_platform_validate_passes_a_valid_stack_and_reports_warnings(tmp_path):
    from trainyard.stack_deploy import validate as validate_stack

    document = yaml.safe_load(STACK_TEXT)
    document["config"].pop("trainyard:tenant")
    document["config"]["trainyard:tenants"][0]["quota"]["gpu"] = 16
    document["config"]["trainyard:tenants"].append(
        {"name": "team-b", "catalogVersion": "1.2.0", "queue": {"name": "team-b"},
         "quota": {"cpu": 96, "memory": "512Gi", "gpu": 24}})
    lines: list[str] = []
    code = validate_stack("x", echo=lines.append, root=_stack_root(tmp_path, yaml.safe_dump(document)))
    assert code == 0, lines
    assert lines[-1] == "stacks/Pulumi.x.yaml: 0 error(s), 1 warning(s)"


def test_platform_validate_through_the_cli_exits_1_on_errors(tmp_path):
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    result = CliRunner().invoke(app, ["platform", "validate", "--stack", "no-such-stack"])
    assert result.exit_code == 1 and "known stacks:" in result.output
