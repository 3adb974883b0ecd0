"""tools/versions.toml is the one place that pins upstream versions; everything else must agree."""

import re
import tomllib
from pathlib import Path

import pytest

from trainyard.toolchain.versions import all_tools, python_pins, sdk_pins

ROOT = Path(__file__).resolve().parents[2]

MAIN_MODULES = {
    "kubernetes": "k8s.io/kubernetes",
    "etcd": "go.etcd.io/etcd/server/v3",
    "kwok": "sigs.k8s.io/kwok",
    "jobset": "sigs.k8s.io/jobset",
    "volcano": "volcano.sh/volcano",
    "kubeflow-trainer": "github.com/kubeflow/trainer/v2",
}


@pytest.mark.parametrize("tool", all_tools(), ids=lambda t: t.name)
def test_every_tool_has_a_wrapper_module_with_go_sum(tool):
    assert (tool.wrapper_dir / "go.mod").is_file()
    assert (tool.wrapper_dir / "go.sum").is_file(), f"commit tools/{tool.module}/go.sum"


@pytest.mark.parametrize("name,module", sorted(MAIN_MODULES.items()))
def test_wrapper_requires_exactly_the_pinned_version(name, module):
    tool = next(t for t in all_tools() if t.name == name)
    gomod = (tool.wrapper_dir / "go.mod").read_text()
    assert re.search(rf"^\s*(require\s+)?{re.escape(module)} {re.escape(tool.version)}\b", gomod, re.M), gomod[:400]


def test_kubernetes_staging_modules_pinned_to_the_same_patch():
    tool = next(t for t in all_tools() if t.name == "kubernetes")
    staging = "v0." + tool.version.split(".", 1)[1]
    replaces = re.findall(r"^\s*(k8s\.io/[\w-]+) => k8s\.io/[\w-]+ (v\S+)", (tool.wrapper_dir / "go.mod").read_text(), re.M)
    assert len(replaces) >= 30
    assert {version for _, version in replaces} == {staging}


def test_python_packages_pinned_like_the_binaries():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = " ".join(pyproject["project"]["optional-dependencies"]["pulumi"])
    for package, version in python_pins().items():
        assert f"{package}=={version}" in deps
    tools = {t.name: t.version.lstrip("v") for t in all_tools()}
    assert python_pins()["pulumi"] == tools["pulumi"]
    assert python_pins()["pulumi-kubernetes"] == tools["pulumi-kubernetes"]


def test_sdk_tested_is_the_pinned_one():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tests = pyproject["project"]["optional-dependencies"]["test"]
    assert [f"{name}=={version}" for name, version in sdk_pins().items()] == [d for d in tests if d.startswith("kubeflow")]


def test_cache_is_outside_the_repo_and_keyed_by_tool_and_version():
    for tool in all_tools():
        assert ROOT not in tool.install_dir.parents
        assert tool.install_dir.name == f"{tool.name}-{tool.version}"


def test_one_build_of_a_tool_at_a_time_and_the_second_finds_it_built(tmp_path, monkeypatch):
    """`make up` and `make test` started together: the second caller waits for the first build, then skips."""
    import threading
    import time as clock

    from trainyard.toolchain import build
    from trainyard.toolchain.versions import tool

    monkeypatch.setenv("TRAINYARD_CACHE", str(tmp_path))
    etcd = tool("etcd")
    assert str(etcd.bin_dir).startswith(str(tmp_path)) and not etcd.is_built()
    events = []

    def first():
        with build._building(etcd):
            events.append("first in")
            clock.sleep(0.3)
            for binary in etcd.binaries:  # what the first build produces
                path = etcd.path(binary)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("#!/bin/sh\n")
            events.append("first out")

    runner = threading.Thread(target=first)
    runner.start()
    while not events:
        clock.sleep(0.01)
    result = build.build_tool(etcd)
    runner.join()
    assert events == ["first in", "first out"] and result.built is False
