"""The generated 100-tenant stack of bench/scale.py is a stack the validator accepts, shaped like the cluster."""

from __future__ import annotations

import pytest
import yaml

from trainyard.cluster.spec import ClusterSpec
from trainyard.paths import repo_root
from trainyard.platform.problems import errors_of
from trainyard.platform.stack_config import NAMESPACE
from trainyard.platform.stack_validation import check_stack_file
from trainyard.scale_stack import scale_stack_document, tenant_name, with_tenant_weight

SPEC = ClusterSpec(name="trainyard-scale", nodes=1000, racks=125, spines=16)


@pytest.fixture(scope="module")
def local_document() -> dict:
    return yaml.safe_load((repo_root() / "stacks" / "Pulumi.local.yaml").read_text())


def test_a_hundred_tenants_on_a_thousand_nodes_validate(tmp_path, local_document):
    document = scale_stack_document(local_document, SPEC, 100)
    path = tmp_path / "Pulumi.scale.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert errors_of(check_stack_file(path, "stacks/Pulumi.scale.yaml")) == []
    config = document["config"]
    tenants = config[f"{NAMESPACE}:tenants"]
    assert [t["name"] for t in tenants][:2] == [tenant_name(0), tenant_name(1)] and len(tenants) == 100
    assert {t["queue"]["capability"]["nvidia.com/gpu"] for t in tenants} == {800}  # a tenth of 8000 GPUs
    racks = config[f"{NAMESPACE}:topology"]["racks"]
    assert len(racks) == 125 and racks[-1] == {"name": "rack-124", "spine": "spine-15"}
    assert config[f"{NAMESPACE}:cluster"]["nodes"] == 1000
    assert len(config[f"{NAMESPACE}:priorityClasses"]) == 101  # one default per tenant and the shared high class


def test_a_one_tenant_change_touches_one_queue_weight(local_document):
    document = scale_stack_document(local_document, SPEC, 3)
    changed = with_tenant_weight(document, 1, 9)
    before, after = (d["config"][f"{NAMESPACE}:tenants"] for d in (document, changed))
    assert [t["queue"]["weight"] for t in after] == [before[0]["queue"]["weight"], 9, before[2]["queue"]["weight"]]
    assert before[1]["queue"]["weight"] != 9  # the original is not modified
    with pytest.raises(ValueError, match="out of range"):
        with_tenant_weight(document, 3, 1)
    with pytest.raises(ValueError, match="at least 1"):
        scale_stack_document(local_document, SPEC, 0)
