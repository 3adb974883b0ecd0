"""The upgrade preflight's pure parts: where a new render differs from the cluster's JobSet, and the verdict."""

import pytest

from trainyard.upgrade import verdicts as V
from trainyard.upgrade.differences import LIMIT, differences
from trainyard.upgrade.text import render


def jobset(env: list[dict], image: str = "torch:1", extra: dict | None = None, suspend: bool = True) -> dict:
    container = {"name": "node", "image": image, "env": env, **(extra or {})}
    return {"kind": "JobSet", "spec": {"suspend": suspend, "replicatedJobs": [
        {"name": "launcher", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}]}}


ENV = [{"name": "A", "value": "1"}]
PATH = "spec.replicatedJobs[launcher].template.spec.template.spec.containers[node]"


@pytest.mark.parametrize("rendered, existing, expected", [
    (jobset(ENV), jobset(ENV), ()),
    # the API server's defaults in the cluster's copy are not differences
    (jobset(ENV), jobset(ENV, extra={"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/x"}), ()),
    (jobset(ENV + [{"name": "PRTE_MCA_x", "value": "y"}]), jobset(ENV), (f"{PATH}.env[PRTE_MCA_x] added",)),
    (jobset([]), jobset(ENV), (f"{PATH}.env changed",)),
    (jobset([{"name": "B", "value": "1"}]), jobset(ENV), (f"{PATH}.env[B] added", f"{PATH}.env[A] removed")),
    (jobset(ENV, image="torch:2"), jobset(ENV), (f"{PATH}.image changed",)),
    # a quantity as rendered and as the API server returns it
    (jobset(ENV, extra={"resources": {"limits": {"nvidia.com/gpu": 8}}}),
     jobset(ENV, extra={"resources": {"limits": {"nvidia.com/gpu": "8"}}}), ()),
    (jobset(ENV, suspend=False), jobset(ENV), ("spec.suspend changed",)),
])
def test_differences_compare_the_render_with_the_cluster_copy(rendered, existing, expected):
    assert differences(rendered, existing) == expected


def test_differences_are_capped_and_counted():
    many = [{"name": f"E{i}", "value": "1"} for i in range(LIMIT + 5)]
    found = differences(jobset(many), jobset([{"name": "E0", "value": "1"}]))
    assert len(found) == LIMIT + 1 and found[-1] == "... and 4 more"


@pytest.mark.parametrize("state, diffs, refusal, build_error, verdict, blocks", [
    (V.FINISHED, ("x",), None, None, V.UNCHANGED, False),
    (V.NOT_STARTED, (), None, None, V.BUILT_BY_NEW, False),
    (V.RUNNING, (), None, None, V.UNCHANGED, False),
    (V.RUNNING, ("x",), None, None, V.KEEPS_RUNNING, False),
    (V.SUSPENDED, (), None, None, V.UNCHANGED, False),
    (V.SUSPENDED, ("x",), None, None, V.UPDATED_ON_RESUME, False),
    (V.SUSPENDED, ("x",), "admission webhook denied", None, V.CANNOT_RESUME, True),
    (V.RUNNING, (), None, "runtime not found", V.CANNOT_BUILD, True),
    (V.NOT_STARTED, (), None, "runtime not found", V.CANNOT_BUILD, True),
])
def test_each_state_gets_its_verdict_and_blocking_ones_an_action(state, diffs, refusal, build_error, verdict, blocks):
    found = V.finding("team-a", "job", state, "TrainingRuntime/torch (snapshot)", diffs, refusal, build_error)
    assert found.verdict == verdict
    assert (found.verdict in V.BLOCKING) is blocks
    assert bool(found.action) is (blocks or verdict == V.KEEPS_RUNNING)
    assert V.summary([found])["blocking"] == int(blocks)


@pytest.mark.parametrize("jobset_obj, finished, state", [
    (None, True, V.FINISHED), (None, False, V.NOT_STARTED),
    ({"spec": {"suspend": True}}, False, V.SUSPENDED), ({"spec": {}}, False, V.RUNNING),
])
def test_state_comes_from_the_trainjob_and_its_jobset(jobset_obj, finished, state):
    assert V.job_state(finished, jobset_obj) == state


def test_the_text_names_each_blocking_job_with_the_api_servers_words_and_the_action():
    blocked = V.finding("team-a", "mpi-1", V.SUSPENDED, "TrainingRuntime/mpi (snapshot)",
                        (f"{PATH}.env[PRTE_MCA_x] added",), "admission webhook denied the request: immutable")
    fine = V.finding("team-b", "torch-1", V.RUNNING, "TrainingRuntime/torch (snapshot)")
    text = render([blocked, fine])
    assert "2 TrainJobs: 1 unchanged, 1 cannot resume after the upgrade" in text
    assert "team-a/mpi-1: cannot resume after the upgrade" in text
    assert "the API server: admission webhook denied the request: immutable" in text
    assert "do: resume it and let it finish" in text
    assert text.rstrip().endswith("1 TrainJob needs the operator before the upgrade "
                                  "(cannot resume after the upgrade or the new version cannot build it)")
    assert render([fine]).rstrip().endswith("nothing blocks the upgrade")


def test_the_version_has_a_changelog_entry_on_top_and_sets_the_default_controller_image():
    from trainyard import __version__
    from trainyard.paths import repo_root
    from trainyard.platform.stack_model import ControllerSpec

    headings = [line[3:].strip() for line in (repo_root() / "docs" / "changelog.md").read_text().splitlines()
                if line.startswith("## ")]
    assert headings and headings[0] == __version__, headings
    assert ControllerSpec().image.endswith(f":{__version__}")


# ---------------------------------------------------------------------------- catalog moves
from trainyard.upgrade import catalog_moves as M  # noqa: E402


def runtime_doc(name: str, version: str, image: str = "torch:1") -> dict:
    return {"metadata": {"name": name, "labels": {"trainyard.dev/catalog-version": version}},
            "spec": {"template": {"metadata": {"labels": {"trainyard.dev/catalog-version": version}},
                                  "spec": {"image": image}}}}


def test_runtime_changes_leave_out_the_release_labels():
    old = {"same": runtime_doc("same", "1.0.0"), "moved": runtime_doc("moved", "1.0.0"), "gone": runtime_doc("gone", "1.0.0")}
    new = {"same": runtime_doc("same", "1.2.0"), "moved": runtime_doc("moved", "1.2.0", "torch:2"),
           "fresh": runtime_doc("fresh", "1.2.0")}
    assert M.runtime_changes(old, new) == {"fresh": "added", "gone": "removed", "moved": "changed"}


MOVE = M.CatalogMove("team-b", "team-b", "1.0.0", "1.2.0", {"moved": "changed", "gone": "removed", "fresh": "added"})


@pytest.mark.parametrize("job, outcome, action", [
    (M.JobInFlight("j", V.RUNNING, "moved", True), "keeps the runtime it was built from (release 1.0.0); it keeps running", ""),
    (M.JobInFlight("j", V.SUSPENDED, "moved", True),
     "keeps the runtime it was built from (release 1.0.0); it resumes on it, not on the new one", ""),
    # a TrainJob naming a missing runtime accepts no change: resuming is one
    (M.JobInFlight("j", V.SUSPENDED, "gone", True, suspended=True), M.RESUME_REFUSED,
     "resume it and let it finish before the move, keep team-b on 1.0.0, or delete it"),
    # a queued gang (its JobSet waits suspended, the TrainJob does not) resumes without a change
    (M.JobInFlight("j", V.SUSPENDED, "gone", True, suspended=False), M.FROZEN + " (release 1.0.0)" + M.FROZEN_WHY,
     "none; under 1.2.0 it cannot be created again (no runtime gone)"),
    (M.JobInFlight("j", V.RUNNING, "gone", True), M.FROZEN + " (release 1.0.0)" + M.FROZEN_WHY,
     "none; under 1.2.0 it cannot be created again (no runtime gone)"),
    (M.JobInFlight("j", V.NOT_STARTED, "moved", False), "built from the new release's runtime (release 1.2.0)", ""),
    (M.JobInFlight("j", V.NOT_STARTED, "gone", False), M.RUNTIME_GONE,
     "keep team-b on 1.0.0 until it has started, or delete it"),
])
def test_each_job_in_flight_keeps_its_snapshot_or_takes_the_new_release(job, outcome, action):
    [moved] = M.job_moves(MOVE, [job])
    assert (moved.outcome, moved.action) == (outcome, action)
    assert M.blocking([moved]) == int(outcome in (M.RUNTIME_GONE, M.RESUME_REFUSED))


@pytest.mark.parametrize("job", [
    M.JobInFlight("j", V.FINISHED, "moved", True),   # finished: nothing to move
    M.JobInFlight("j", V.RUNNING, "fresh", True),    # its runtime is new in the release: untouched
    M.JobInFlight("j", V.RUNNING, "other", True),    # not a runtime the move changes
])
def test_jobs_the_move_does_not_concern_are_left_out(job):
    assert M.job_moves(MOVE, [job]) == []


def test_the_catalog_text_lists_runtimes_by_change_and_each_job_with_its_action():
    jobs = M.job_moves(MOVE, [M.JobInFlight("late", V.NOT_STARTED, "gone", False)])
    text = M.render([MOVE], jobs)
    assert text.splitlines() == [
        "catalog: team-b (team-b) 1.0.0 -> 1.2.0", "  changed: moved", "  added: fresh", "  removed: gone",
        "  team-b/late (not started, gone removed): cannot start: its runtime is removed",
        "    do: keep team-b on 1.0.0 until it has started, or delete it"]
