"""The small openAPIV3Schema validator used by ``catalog lint``."""

from __future__ import annotations

import pytest

from trainyard.runtimes.schema import validate

SCHEMA = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "minProperties": 1,
            "properties": {
                "numNodes": {"type": "integer", "minimum": 0},
                "impl": {"type": "string", "enum": ["OpenMPI", ""]},
                "port": {"x-kubernetes-int-or-string": True},
                "jobs": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 5}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


@pytest.mark.parametrize(
    "obj, want",
    [
        ({"metadata": {"anything": 1}, "spec": {"numNodes": 1, "impl": "OpenMPI", "port": "http", "labels": {"a": "b"}, "free": {"x": 1}}}, []),
        ({}, ["spec: Required value"]),
        ({"spec": {}}, ["spec: must have at least 1 properties"]),
        ({"spec": {"numNodes": "2"}}, ["spec.numNodes: must be an integer, got string"]),
        ({"spec": {"numNodes": True}}, ["spec.numNodes: must be an integer, got boolean"]),
        ({"spec": {"numNodes": -1}}, ["spec.numNodes: must be greater than or equal to 0"]),
        ({"spec": {"impl": "Intel"}}, ["spec.impl: Unsupported value 'Intel': supported values: 'OpenMPI', ''"]),
        ({"spec": {"port": 1.5}}, ["spec.port: must be an integer or a string, got number"]),
        ({"spec": {"jobs": [{}, {"name": "toolong"}, {"name": "a"}]}}, ["spec.jobs: must have at most 2 items", "spec.jobs[0].name: Required value", "spec.jobs[1].name: must have at most 5 characters"]),
        ({"spec": {"labels": {"a": 1}}}, ["spec.labels.a: must be a string, got integer"]),
        ({"spec": {"typo": 1}}, ["spec.typo: unknown field (not in the CRD schema; the API server would drop it)"]),
    ],
    ids=["valid", "required", "minProperties", "type", "bool is not int", "minimum", "enum", "int-or-string", "array rules", "additionalProperties", "unknown field"],
)
def test_validate(obj, want):
    assert validate(obj, SCHEMA) == want
