"""`catalog show --image/--real-nodes/--name-suffix`: rendered copies for real nodes, the release untouched."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainyard.cluster.real_node_spec import REAL_NODE_LABEL
from trainyard.runtimes.model import CatalogError
from trainyard.runtimes.overrides import override_runtime, parse_image_overrides, pod_specs, release_images
from trainyard.runtimes.store import load_catalog

TRAINYARD = Path(sys.executable).parent / "trainyard"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def show(*args: str) -> list[dict]:
    out = subprocess.run([str(TRAINYARD), "catalog", "show", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("pairs,expected_keys", [
    (["torch=local/t:1"], {"torch"}),
    (["all=local/t:1"], "all"),
    (["openmpi=local/m:1", "jax=local/j:1"], {"openmpi", "jax"}),
])
def test_image_overrides_map_release_images(catalog, pairs, expected_keys):
    images = release_images(catalog, "1.2.0")
    mapping = parse_image_overrides(pairs, catalog, "1.2.0")
    keys = set(images) if expected_keys == "all" else expected_keys
    assert set(mapping) == {images[k] for k in keys}


@pytest.mark.parametrize("pair,message", [("torch", "expected KEY=IMAGE"), ("pytorch=x:1", "has no image 'pytorch'"),
                                          ("torch=", "expected KEY=IMAGE")])
def test_bad_image_override_names_the_option_and_the_fix(catalog, pair, message):
    with pytest.raises(CatalogError) as err:
        parse_image_overrides([pair], catalog, "1.2.0")
    assert message in str(err.value) and "--image" in str(err.value)


def test_override_swaps_images_pins_pods_and_renames_without_touching_the_input():
    runtime = {"metadata": {"name": "r"}, "spec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "initContainers": [{"name": "init", "image": "busybox:1"}],
            "containers": [{"name": "node", "image": "torch:1"}, {"name": "side", "image": "other:1"}]}}}}}]}}}}
    before = json.dumps(runtime, sort_keys=True)
    toleration = {"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
    out = override_runtime(runtime, images={"torch:1": "local:1", "busybox:1": "local:1"},
                           node_selector={REAL_NODE_LABEL: "true"}, tolerations=[toleration], name_suffix="-real")
    assert json.dumps(runtime, sort_keys=True) == before
    (spec,) = pod_specs(out)
    assert out["metadata"]["name"] == "r-real"
    assert [c["image"] for c in spec["initContainers"] + spec["containers"]] == ["local:1", "local:1", "other:1"]
    assert spec["nodeSelector"] == {REAL_NODE_LABEL: "true"}
    assert spec["tolerations"][-1] == toleration and len(spec["tolerations"]) == 2


def test_show_renders_every_runtime_for_real_nodes_from_the_cli():
    plain = show("1.2.0", "--tenant-queue", "team-a", "--namespace", "team-a")
    local = show("1.2.0", "--tenant-queue", "team-a", "--namespace", "team-a", "--image",
                 "all=trainyard.local/training:local", "--real-nodes", "--name-suffix", "-real")
    renamable = [r for r in plain if r["metadata"]["labels"].get("trainer.kubeflow.org/framework") != "torchtune"]
    assert [r["metadata"]["name"] + "-real" for r in renamable] == [r["metadata"]["name"] for r in local]
    for runtime in local:
        for spec in pod_specs(runtime):
            assert {c["image"] for c in spec.get("initContainers", []) + spec["containers"]} == {
                "trainyard.local/training:local"}
            assert spec["nodeSelector"][REAL_NODE_LABEL] == "true"
    assert plain == show("1.2.0", "--tenant-queue", "team-a", "--namespace", "team-a"), "the release is unchanged"


def test_a_torchtune_runtime_keeps_its_name_which_names_its_model():
    """The controller maps `torchtune-<model>-<size>` to a model config (as upstream): `-real` would be refused."""
    out = subprocess.run([str(TRAINYARD), "catalog", "show", "1.2.0", "--image", "all=x:1", "--name-suffix", "-real"],
                         capture_output=True, text=True)
    assert out.returncode == 0
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(out.stdout) if d}
    assert names and not any(n.startswith("torchtune-") for n in names)
    assert "torchtune-llama3.2-1b: left out: a torchtune runtime's name names its model" in out.stderr
    one = subprocess.run([str(TRAINYARD), "catalog", "show", "1.2.0", "torchtune-llama3.2-1b", "--name-suffix", "-real"],
                         capture_output=True, text=True)
    assert one.returncode != 0 and not one.stdout
    assert "names its model" in one.stderr and "--namespace" in one.stderr
    kept = show("1.2.0", "torchtune-llama3.2-1b", "--image", "all=x:1", "--real-nodes")
    assert [d["metadata"]["name"] for d in kept] == ["torchtune-llama3.2-1b"]
