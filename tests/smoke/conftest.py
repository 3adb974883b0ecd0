"""Point the smoke suite at an environment.

- Any environment: TRAINYARD_SMOKE_KUBECONFIG (and optionally TRAINYARD_SMOKE_CONTEXT) plus
  TRAINYARD_SMOKE_STACK=stacks/Pulumi.<env>.yaml, e.g.
  TRAINYARD_SMOKE_KUBECONFIG=~/.kube/config TRAINYARD_SMOKE_CONTEXT=prod-gpu \
  TRAINYARD_SMOKE_STACK=stacks/Pulumi.prod.yaml .venv/bin/pytest tests/smoke
- Default (`make test`): the local stack deployed on the test cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from trainyard.platform.stack_config import StackConfig, TenantSpec, parse_stack_config, stack_values


@dataclass
class Environment:
    kubeconfig: str
    context: str | None
    stack: StackConfig
    """The stack file as the platform program reads it (same parser, same defaults)."""

    def kubectl(self) -> str:
        from trainyard.toolchain.versions import binary

        context = f" --context {self.context}" if self.context else ""
        return f"{binary('kubectl')} --kubeconfig {self.kubeconfig}{context}"

    @property
    def tenants(self) -> tuple[TenantSpec, ...]:
        return self.stack.tenants


def read_stack(document: dict, file: str) -> StackConfig:
    config, _ = parse_stack_config(stack_values(document), file=file)
    return config


@pytest.fixture(scope="session")
def environment(request) -> Environment:
    kubeconfig = os.environ.get("TRAINYARD_SMOKE_KUBECONFIG")
    if kubeconfig:
        stack_file = Path(os.environ.get("TRAINYARD_SMOKE_STACK", "stacks/Pulumi.local.yaml"))
        return Environment(os.path.expanduser(kubeconfig), os.environ.get("TRAINYARD_SMOKE_CONTEXT"),
                           read_stack(yaml.safe_load(stack_file.read_text()), str(stack_file)))
    platform = request.getfixturevalue("platform")
    from trainyard.cluster.local import ClusterPaths

    return Environment(str(ClusterPaths.for_name(platform.cluster.name).kubeconfig), None,
                       read_stack(platform.values, f"stacks/Pulumi.{platform.stack_name}.yaml"))
