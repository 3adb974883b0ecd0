"""A broken stack fails `pulumi up` with the clean problem list only (`pulumi.RunError`): no
"unhandled exception", no traceback, and nothing but the Stack itself in the state (issue 14.1).

Needs the Pulumi toolchain, not a cluster: the program stops before it creates a provider.
"""

from __future__ import annotations

import pytest

from trainyard.toolchain.build import ensure_built

pytestmark = pytest.mark.integration

BROKEN = {
    "config": {
        "trainyard:kubeconfig": "/nonexistent/kubeconfig", "trainyard:kubeContext": "nowhere",
        "trainyard:controller": {"webhook": {"certificate": "cert-manager"}},
        "trainyard:cluster": {"nodes": 4, "gpusPerNode": 8, "cpuPerNode": 96, "memoryPerNode": "1024Gi"},
        "trainyard:tenant": [{"name": "team-a", "catalogVersion": "1.2.0", "queue": {"name": "team-a"},
                              "quota": {"cpu": 96, "memory": "512Gi", "gpu": 8}}],
        "trainyard:priorityClasses": [{"name": "p", "value": 1, "preemption": "Never"}],
    }
}


def test_broken_stack_fails_with_the_message_only_and_registers_nothing(platform_stack, tmp_path):
    from pulumi import automation as auto

    ensure_built("pulumi", "pulumi-kubernetes")
    stack = platform_stack("strict-check", tmp_path, values=BROKEN, stack="strict")
    with pytest.raises(auto.CommandError) as caught:
        stack.up()
    text = str(caught.value)
    assert "trainyard:tenant: unknown key" in text and "did you mean 'tenants'" in text
    assert "trainyard:priorityClasses[p].preemption: unknown key" in text
    assert "stacks/Pulumi.strict.yaml:" in text  # the line of the stack file Pulumi read
    assert "Traceback" not in text and "unhandled exception" not in text
    resources = stack.stack.export_stack().deployment.get("resources") or []
    assert {r["type"] for r in resources} <= {"pulumi:pulumi:Stack"}, resources
