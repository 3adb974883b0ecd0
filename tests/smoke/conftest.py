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


@dataclass
class Environment:
    kubeconfig: str
    context: str | None
    stack_values: dict

    def kubectl(self) -> str:
        from trainyard.toolchain.versions import binary

        context = f" --context {self.context}" if self.context else ""
        return f"{binary('kubectl')} --kubeconfig {self.kubeconfig}{context}"

    @property
    def tenants(self) -> list[dict]:
        return self.stack_values["config"].get("trainyard:tenants", [])


@pytest.fixture(scope="session")
def environment(request) -> Environment:
    kubeconfig = os.environ.get("TRAINYARD_SMOKE_KUBECONFIG")
    if kubeconfig:
        stack_file = Path(os.environ.get("TRAINYARD_SMOKE_STACK", "stacks/Pulumi.local.yaml"))
        return Environment(os.path.expanduser(kubeconfig), os.environ.get("TRAINYARD_SMOKE_CONTEXT"),
                           yaml.safe_load(stack_file.read_text()))
    platform = request.getfixturevalue("platform")
    from trainyard.cluster.local import ClusterPaths

    return Environment(str(ClusterPaths.for_name(platform.cluster.name).kubeconfig), None, platform.values)
