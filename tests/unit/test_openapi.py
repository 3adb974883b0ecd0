"""One OpenAPI validator: the controller's admission and catalog lint report the same violations."""

from __future__ import annotations

from trainyard.controller import schema as controller_schema
from trainyard.openapi import validate
from trainyard.runtimes import schema as lint_schema

SCHEMA = {"type": "object", "properties": {
    "numNodes": {"type": "integer", "minimum": 1},
    "name": {"type": "string", "pattern": "^[a-z]+$"},
}}


def test_both_front_ends_use_the_shared_validator():
    assert controller_schema.validate is validate
    assert lint_schema.validate_openapi is validate


def test_same_violation_api_server_words_and_lint_words():
    (api,) = validate(SCHEMA, {"numNodes": 0}, "spec")
    assert str(api) == "spec.numNodes: Invalid value: 0: spec.numNodes in body should be greater than or equal to 1"
    assert (api.code, api.expected) == ("minimum", 1)
    assert lint_schema.say(api) == "spec.numNodes: must be greater than or equal to 1"


def test_structural_mode_reports_unknown_fields_and_skips_patterns():
    value = {"name": "Not-Lower", "typo": 1}
    assert [str(e) for e in validate(SCHEMA, value, "")] == [
        ".name: Invalid value: \"Not-Lower\": .name in body should match '^[a-z]+$'"]
    strict = validate(SCHEMA, value, "", unknown_fields=True, structural_only=True)
    assert [str(e) for e in strict] == ['.typo: Invalid: unknown field "typo"']
    assert lint_schema.validate(value, SCHEMA) == ["typo: unknown field (not in the CRD schema; the API server would drop it)"]
