"""What trainyard changes in the upstream CRDs it installs (pure): only the PodGroup CRD's selectable phase."""

from __future__ import annotations

import copy

import pytest

from trainyard.platform.upstream import POD_GROUP_CRD, with_selectable_phase


def crd(name: str, *versions: dict) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": name.split(".", 1)[1], "versions": list(versions)}}


PHASE = {"jsonPath": ".status.phase"}


@pytest.mark.parametrize("given, fields", [
    ({"name": "v1beta1", "served": True}, [PHASE]),
    ({"name": "v1beta1", "selectableFields": [{"jsonPath": ".spec.queue"}]}, [{"jsonPath": ".spec.queue"}, PHASE]),
    ({"name": "v1beta1", "selectableFields": [PHASE]}, [PHASE]),  # idempotent: a second pass adds nothing
])
def test_the_podgroup_crd_gets_the_phase_as_a_selectable_field_in_every_version(given, fields):
    original = crd(POD_GROUP_CRD, given, {"name": "v1alpha1"})
    kept = copy.deepcopy(original)
    changed = with_selectable_phase(original)
    assert [v["selectableFields"] for v in changed["spec"]["versions"]] == [fields, [PHASE]]
    assert original == kept, "the input is not modified"
    assert with_selectable_phase(changed) == changed


def test_other_crds_are_left_as_upstream_wrote_them():
    queues = crd("queues.scheduling.volcano.sh", {"name": "v1beta1"})
    assert with_selectable_phase(queues) is queues
