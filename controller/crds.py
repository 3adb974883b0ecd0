"""CustomResourceDefinitions for trainer.kubeflow.org, generated from the models in `api.py`.

Served versions: v1alpha1 (storage) and v2alpha1 (same schema, served so the seed-era manifests that say
`trainer.kubeflow.org/v2alpha1` apply unchanged); conversion strategy None (identical schemas).
"""

from __future__ import annotations

from trainyard.k8s import part_of_trainyard

from . import api
from trainyard import k8s as K
from . import constants as C
from .schema import to_openapi

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _crd(kind: str, plural: str, scope: str, schema: dict, columns: list[dict], status: bool) -> dict:
    versions = []
    for version in K.TRAINER_SERVED_VERSIONS:
        entry: dict = {
            "name": version,
            "served": True,
            "storage": version == K.TRAINER_VERSION,
            "schema": {"openAPIV3Schema": to_openapi(schema)},
            "additionalPrinterColumns": columns,
        }
        if status:
            entry["subresources"] = {"status": {}}
        versions.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{K.TRAINER_GROUP}", "labels": part_of_trainyard()},
        "spec": {
            "group": K.TRAINER_GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "conversion": {"strategy": "None"},
            "versions": versions,
        },
    }


def crd_objects() -> list[dict]:
    """The three CRDs, TrainJob first; deterministic (the same dicts on every call)."""
    return [
        _crd(C.TRAINJOB_KIND, "trainjobs", "Namespaced", api.trainjob_schema(),
             [{"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"}, _AGE], status=True),
        _crd(C.TRAINING_RUNTIME_KIND, "trainingruntimes", "Namespaced", api.runtime_schema(), [_AGE], status=False),
        _crd(C.CLUSTER_TRAINING_RUNTIME_KIND, "clustertrainingruntimes", "Cluster", api.runtime_schema(), [_AGE], status=False),
    ]
