"""`trainyard cluster env`: shell lines a POSIX shell evaluates to the cluster's kubeconfig and the pinned kubectl."""

import subprocess

import pytest

from trainyard.cli.cluster import shell_env


@pytest.mark.parametrize("kubeconfig, kubectl_dir", [
    ("/root/.cache/trainyard/clusters/trainyard/kubeconfig.yaml", "/root/.cache/trainyard/tools/k/bin"),
    ("/tmp/with space/kube config.yaml", "/tmp/it's here/bin"),
])
def test_the_lines_set_kubeconfig_and_put_kubectl_first_even_with_quotes_and_spaces(kubeconfig, kubectl_dir):
    script = shell_env(kubeconfig, kubectl_dir) + '\nprintf "%s\\n%s" "$KUBECONFIG" "${PATH%%:*}"'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [kubeconfig, kubectl_dir]
