"""The Pulumi CLI and the Kubernetes provider built from Go modules work offline."""

from __future__ import annotations

import pytest

from trainyard.pulumi_env import install_plugins, offline_env, run_pulumi
from trainyard.toolchain.build import ensure_built
from trainyard.toolchain.versions import python_pins, tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def built():
    ensure_built("pulumi", "pulumi-kubernetes")


def test_pulumi_version_is_the_pinned_release():
    out = run_pulumi("version", capture=True).stdout.strip()
    assert out == tool("pulumi").version
    assert out.lstrip("v") == python_pins()["pulumi"], "CLI and PyPI SDK are the same release"


def test_plugin_ls_lists_the_built_kubernetes_provider_offline():
    install_plugins()
    out = run_pulumi("plugin", "ls", capture=True).stdout
    version = tool("pulumi-kubernetes").version.lstrip("v")
    assert any(line.split()[:3] == ["kubernetes", "resource", version] for line in out.splitlines()), out


def test_offline_environment_never_reaches_out():
    env = offline_env({})
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert env["PULUMI_BACKEND_URL"].startswith("file://")
    assert env["PATH"].split(":")[0] == str(tool("pulumi").bin_dir)
