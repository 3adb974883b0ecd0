"""Differential tests (issue 11.2): the same TrainJobs reconciled by Kubeflow Trainer v2.3.0's own
trainer-controller-manager and by trainyard's controller, in turn, on one cluster; every difference in what they
produce is either absent or explained in allowed_differences.yaml, and both admissions refuse the same invalid
TrainJobs.

Design: phase 1 runs upstream's controller (the cluster starts with it) in namespace `diff-upstream`; its
TrainJobs and runtimes are deleted with the controller stopped (`stop_trainjob_controller`), then
`switch_trainjob_controller` installs trainyard's CRDs and webhook and starts trainyard's controller, and phase 2
creates the same TrainJobs (only those upstream admitted) in `diff-trainyard`. The namespace name is normalized
away. Every TrainJob is created suspended (no pod runs, the status is stable: Suspended).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

import diff_cases
from diff_compare import SUMMARY, Difference, compare_case, load_allow_list, normalize_object, unexplained
from diff_phase import Api, clean_up, run_phase
from trainyard.cluster import local
from trainyard.cluster.trainer_controllers import stop_trainjob_controller, switch_trainjob_controller
from trainyard.paths import cache_dir
from waiting import wait_for

pytestmark = pytest.mark.integration

NAMESPACES = {"upstream": "diff-upstream", "trainyard": "diff-trainyard"}
REPORT = cache_dir() / "differential-report.json"  # figures of the last run
RAW = cache_dir() / "differential-objects.json"  # what both controllers produced, for a look at a difference


def _cluster_objects(api: Api) -> None:
    for obj in diff_cases.seed_cluster_objects():
        message = api.create(obj)
        assert message is None, f"{obj['kind']} {obj['metadata']['name']}: {message}"


def test_upstream_controller_builds_jobset_and_podgroup_and_its_webhook_refuses_unknown_runtimes(diff_cluster):
    """Before the differential phases (this module's first test): the process `cluster up --trainjob-controller
    upstream` started is upstream's binary, with upstream's CRD, and it builds a TrainJob's JobSet and Volcano
    PodGroup; its webhook refuses an unknown runtime kind. Its objects are deleted before phase 1."""
    from trainyard.cluster.processes import ProcessTable
    from trainyard.cluster.state import ClusterError
    from builders import EIGHT_GPUS, new_trainjob, torch_runtime

    name = diff_cluster.name
    runtime = torch_runtime("oracle-torch-volcano", queue="default")
    assert local.read_state(name)["trainjob_controller"] == "upstream"
    pid = ProcessTable(local.ClusterPaths.for_name(name).root).load()["trainjob-controller"]
    assert "trainer-controller-manager" in open(f"/proc/{pid}/cmdline").read(), "upstream's binary, not trainyard's"
    crd = json.loads(local.kubectl(name, "get", "crd", "trainjobs.trainer.kubeflow.org", "-o", "json"))
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"], "upstream's CRD, not trainyard's"

    def owned_by(kind_plural: str, trainjob: str) -> dict | None:
        items = json.loads(local.kubectl(name, "get", kind_plural, "-n", "oracle", "-o", "json"))["items"]
        return next((i for i in items if any(r["kind"] == "TrainJob" and r["name"] == trainjob and r.get("controller")
                                             for r in i["metadata"].get("ownerReferences") or [])), None)

    local.kubectl(name, "create", "namespace", "oracle")
    try:
        local.kubectl(name, "create", "-f", "-", input_text=json.dumps(runtime))
        local.kubectl(name, "create", "-f", "-", input_text=json.dumps(new_trainjob(
            "mnist", runtime["metadata"]["name"], "ClusterTrainingRuntime", namespace="oracle", nodes=2,
            per_node=EIGHT_GPUS)))
        jobset = wait_for(lambda: owned_by("jobsets.jobset.x-k8s.io", "mnist"), 90, "upstream's JobSet")
        podgroup = wait_for(lambda: owned_by("podgroups.scheduling.volcano.sh", "mnist"), 90, "upstream's PodGroup")
        assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
        assert podgroup["spec"]["minMember"] == 2
        with pytest.raises(ClusterError) as refused:
            local.kubectl(name, "create", "-f", "-", input_text=json.dumps(new_trainjob(
                "bogus", runtime["metadata"]["name"], "BogusRuntime", namespace="oracle", nodes=2, per_node=EIGHT_GPUS)))
        assert "validator.trainjob.trainer.kubeflow.org" in str(refused.value)
        assert "unsupported runtime: BogusRuntime.trainer.kubeflow.org" in str(refused.value)
    finally:
        local.kubectl(name, "delete", "namespace", "oracle", "--wait=true", "--timeout=120s")
        local.kubectl(name, "delete", "clustertrainingruntime", runtime["metadata"]["name"], "--ignore-not-found")


@pytest.fixture(scope="module")
def run(diff_cluster):
    started = time.monotonic()
    cases = diff_cases.all_cases()
    invalid = diff_cases.invalid_table() + diff_cases.generated_invalid()
    extra = diff_cases.invalid_table_runtimes()
    api = Api(str(local.ClusterPaths.for_name(diff_cluster.name).kubeconfig))
    _cluster_objects(api)
    cluster_runtimes = sorted({r["metadata"]["name"] for c in cases for r in c.runtimes + extra
                               if r["kind"] == "ClusterTrainingRuntime"})

    controllers = {"upstream": _controller_state(diff_cluster.name)}
    upstream = run_phase(api, "upstream", NAMESPACES["upstream"], cases, invalid, extra)
    stop_trainjob_controller(diff_cluster.name)
    clean_up(api, NAMESPACES["upstream"], cluster_runtimes)
    t0 = time.monotonic()
    switch_trainjob_controller(diff_cluster.name, "trainyard", echo=lambda *_: None)
    switched = time.monotonic() - t0
    controllers["trainyard"] = _controller_state(diff_cluster.name)
    trainyard = run_phase(api, "trainyard", NAMESPACES["trainyard"], cases, invalid, extra,
                          only=set(upstream.accepted))

    differences: list[Difference] = []
    for name in upstream.accepted:
        if name in trainyard.refused:
            differences.append(Difference(name, "TrainJob/<trainjob>:$admission-refused", "trainyard",
                                          "admitted", trainyard.refused[name]))
            continue
        ups = [normalize_object(o, NAMESPACES["upstream"]) for o in upstream.objects.get(name, [])]
        tys = [normalize_object(o, NAMESPACES["trainyard"]) for o in trainyard.objects.get(name, [])]
        differences += compare_case(name, ups, tys)
    for runtime in sorted(set(upstream.refused_runtimes) ^ set(trainyard.refused_runtimes)):
        side = "upstream" if runtime in upstream.refused_runtimes else "trainyard"
        differences.append(Difference(runtime, "Runtime:$admission-refused", side, upstream.refused_runtimes.get(runtime),
                                      trainyard.refused_runtimes.get(runtime)))
    for case, _tj in invalid:  # admission: refused or admitted, whatever the message
        refused = {side: bool(phase.admission[case]) for side, phase in (("upstream", upstream), ("trainyard", trainyard))}
        if refused["upstream"] != refused["trainyard"]:
            side = "upstream" if refused["upstream"] else "trainyard"
            differences.append(Difference(case, "TrainJob:$admission-refused", side, upstream.admission[case],
                                          trainyard.admission[case]))
    allowed = load_allow_list()
    left = unexplained(differences, allowed)
    result = {"controllers": controllers, "cases": cases, "upstream": upstream, "trainyard": trainyard, "differences": differences,
              "unexplained": left, "allowed": allowed, "invalid": invalid,
              "seconds": {"upstream": upstream.seconds, "switch": switched, "trainyard": trainyard.seconds,
                          "fixture": time.monotonic() - started}}
    _write_report(result)
    return result


def _controller_state(name: str) -> dict:
    """Which TrainJob controller runs (its command line), the trainjobs CRD's versions, the webhooks."""
    from trainyard.cluster.processes import ProcessTable

    pid = ProcessTable(local.ClusterPaths.for_name(name).root).load()["trainjob-controller"]
    crd = json.loads(local.kubectl(name, "get", "crd", "trainjobs.trainer.kubeflow.org", "-o", "json"))
    hooks = local.kubectl(name, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o",
                          "jsonpath={.items[*].metadata.name}").split()
    return {"argv": open(f"/proc/{pid}/cmdline").read().replace("\0", " "),
            "versions": [v["name"] for v in crd["spec"]["versions"]],
            "webhooks": sorted(h for h in hooks if "trainer" in h), "state": local.read_state(name)["trainjob_controller"]}


def _write_report(result: dict) -> None:
    up, ty = result["upstream"], result["trainyard"]
    messages_differ = [c for c, _ in result["invalid"]
                       if up.admission.get(c) and ty.admission.get(c) and up.admission[c] != ty.admission[c]]
    report = {
        "cases": dict(Counter(c.group for c in result["cases"])),
        "accepted_by_upstream": dict(Counter(c.group for c in result["cases"] if c.name in up.accepted)),
        "refused_by_upstream": up.refused, "runtimes_refused_by_upstream": up.refused_runtimes,
        "runtimes_refused_by_trainyard": ty.refused_runtimes,
        "differences": len(result["differences"]), "unexplained": [str(d) for d in result["unexplained"]],
        "allow_list_matches": {f"{a.path} [{a.side}] {a.cases}": a.matched for a in result["allowed"]},
        "invalid_cases": len(result["invalid"]),
        "invalid_refusal_messages_differ": len(messages_differ),
        "admission": {c: {"upstream": up.admission.get(c), "trainyard": ty.admission.get(c)} for c, _ in result["invalid"]},
        "seconds": result["seconds"],
    }
    REPORT.write_text(json.dumps(report, indent=2, default=str))
    SUMMARY.append(f"differential: {len(result['cases'])} TrainJobs ({dict(report['accepted_by_upstream'])} admitted by "
                   f"upstream), {report['differences']} differences, {len(result['unexplained'])} unexplained, "
                   f"{len(result['allowed'])} allow-list entries; invalid table {report['invalid_cases']} cases, "
                   f"refusal messages differ in {report['invalid_refusal_messages_differ']}; "
                   f"{result['seconds']['fixture']:.0f} s; figures in {REPORT}")
    RAW.write_text(json.dumps({side: {"namespace": phase.namespace, "accepted": phase.accepted,
                                      "objects": phase.objects} for side, phase in (("upstream", up), ("trainyard", ty))}))


def test_every_catalog_runtime_seed_and_enough_generated_pairs_were_reconciled_by_both(run):
    up, ty = run["upstream"], run["trainyard"]
    accepted = Counter(c.group for c in run["cases"] if c.name in up.accepted)
    catalog = [c for c in run["cases"] if c.group == "catalog"]
    assert len(catalog) == len(diff_cases.catalog_cases()) >= 14 and accepted["catalog"] == len(catalog), up.refused
    assert accepted["seed"] == len(diff_cases.seed_index()["runtimes"]), up.refused
    assert accepted["generated"] >= 200, f"{accepted['generated']} generated pairs admitted by upstream: {up.refused}"
    for phase in (up, ty):
        produced = [n for n in phase.accepted if len(phase.objects.get(n, [])) < 2]
        assert not produced or phase is ty, f"{phase.which} built nothing for {produced}"


def test_each_phase_ran_its_own_controller_crds_and_webhooks(run):
    """switch_trainjob_controller replaced upstream's manager, CRDs and webhooks by trainyard's."""
    up, ty = run["controllers"]["upstream"], run["controllers"]["trainyard"]
    assert "trainer-controller-manager" in up["argv"] and up["versions"] == ["v1alpha1"] and up["state"] == "upstream"
    assert up["webhooks"] == ["defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org"]
    assert "trainyard.cli.controller run" in ty["argv"] and "v2alpha1" in ty["versions"] and ty["state"] == "trainyard"
    assert ty["webhooks"] == ["trainyard-trainer-validator"]


def test_outputs_are_the_same_or_the_difference_is_allowed(run):
    left = run["unexplained"]
    by_path = Counter((d.path, d.side) for d in left)
    summary = "\n".join(f"{n:4d}x {path} [{side}]" for (path, side), n in by_path.most_common(40))
    examples = "\n".join(str(d) for d in left[:15])
    assert not left, (f"{len(left)} differences not in allowed_differences.yaml (see {REPORT}):\n{summary}\n"
                      f"examples:\n{examples}")


def test_allow_list_has_no_stale_entry(run):
    stale = [f"{a.path} [{a.side}] cases={a.cases}" for a in run["allowed"] if not a.matched and not a.flaky]
    assert not stale, f"allowed_differences.yaml entries that match no difference: {stale}"


def test_every_invalid_trainjob_is_refused(run):
    """Refused by both (a refusal by one side only is a difference: allowed, or the outputs test fails), and
    no case of the table is accepted by both (it would test nothing)."""
    up, ty = run["upstream"], run["trainyard"]
    assert len(run["invalid"]) >= 15
    accepted_by_both = [c for c, _ in run["invalid"] if not up.admission[c] and not ty.admission[c]]
    assert not accepted_by_both, accepted_by_both
