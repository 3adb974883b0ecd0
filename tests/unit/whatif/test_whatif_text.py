"""The what-if's words name the engine that produced the figures, and a cluster replay's unfinished jobs and notes."""

from trainyard.whatif.text import engine_words, render


def side(engine, unfinished=()):
    return {"stack": "s", "workload": {"source": "generated", "jobs": 3, "seed": 0}, "allocation": 0.5,
            "goodput": 0.5, "tenants": {}, "wait_by_size": {}, "never_runnable": [], "not_modelled": [], "limits": {},
            "engine": engine, "unfinished": list(unfinished)}


def test_the_model_is_named_by_default():
    assert engine_words({}) == engine_words({"name": "model"}) == "trainyard's model of vc-scheduler"
    assert engine_words({"name": "model"}, {"members": 16, "start_jitter_s": 0.7}) == (
        "trainyard's model of vc-scheduler (mean of 16 replays, each job up to 0.7s later)")


def test_a_cluster_replay_says_so_with_its_speed_its_notes_and_the_jobs_it_gave_up_on():
    engine = {"name": "cluster", "speedup": 4.0, "notes": ["time runs 4x faster on the cluster"]}
    text = render({"current": side(engine), "proposed": side(engine, [f"j{i}" for i in range(7)])}, [])
    assert "replayed on a local cluster per side (real vc-scheduler, JobSet and trainyard controllers, 4x time)" in text
    assert "unfinished (proposed): 7 jobs still waiting when the replay gave up (j0, j1, j2, j3, j4, ...)" in text
    assert "unfinished (current)" not in text
    assert "cluster engine: time runs 4x faster on the cluster" in text


def test_what_the_model_leaves_out_points_to_the_real_engine():
    plain = render({"current": side({"name": "model"}), "proposed": side({"name": "model"})}, [])
    assert "--engine cluster" not in plain
    left_out = side({"name": "model"})
    left_out["not_modelled"] = ["scheduler.profile fair-share: its preempt and reclaim actions are not replayed"]
    text = render({"current": side({"name": "model"}), "proposed": left_out}, [])
    assert "not modelled (proposed): scheduler.profile fair-share" in text
    assert "replay the change on the real engine with --engine cluster" in text


def test_a_change_of_queue_order_states_the_models_known_limit():
    model = {"current": side({"name": "model"}), "proposed": side({"name": "model"})}
    for change in ("tenants[team-b].queue.weight: 1 -> 4", "scheduler.queuePlugin: proportion -> capacity",
                   "tenants[team-a].queue.deserved.nvidia.com/gpu: (none) -> 21"):
        assert "queue order (weight, deserved, queue plugin)" in render(model, [change]), change
        assert "--engine cluster" in render(model, [change])
    assert "queue order" not in render(model, ["tenants[team-a].queue.capability.nvidia.com/gpu: 32 -> 16"])
    cluster = {"current": side({"name": "cluster"}), "proposed": side({"name": "cluster"})}
    assert "queue order" not in render(cluster, ["tenants[team-b].queue.weight: 1 -> 4"])
