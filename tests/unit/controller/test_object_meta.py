"""TrainJob and runtime metadata checked as the API server does (issue 18.5): unknown keys, namespace, label and
annotation keys and values; before, `validate` passed all of these."""

import pytest

from trainyard.controller.object_meta import metadata_errors, unknown_metadata_errors
from trainyard.controller.strict import strict_problems

from ctl_builders import runtime, trainjob

LONG = "x" * 64


def with_meta(**meta):
    tj = trainjob()
    tj["metadata"].update(meta)
    return tj


@pytest.mark.parametrize("meta,field,text", [
    ({"namespace": "Team-A"}, "metadata.namespace", "a namespace is a lowercase DNS label"),
    ({"namespace": "a" * 64}, "metadata.namespace", "lowercase DNS label"),
    ({"labels": {"bad key": "x"}}, "metadata.labels[bad key]", "its name part must be at most 63 characters"),
    ({"labels": {"Example.com/x": "y"}}, "metadata.labels[Example.com/x]", "prefix must be a lowercase DNS subdomain"),
    ({"labels": {LONG: "y"}}, f"metadata.labels[{LONG}]", "name part must be at most 63"),
    ({"labels": {"owner": "has space"}}, "metadata.labels[owner]", "a label value may be empty"),
    ({"labels": {"owner": LONG}}, "metadata.labels[owner]", "a label value may be empty"),
    ({"labels": {"owner": 5}}, "metadata.labels[owner]", "must be a string"),
    ({"labels": ["a"]}, "metadata.labels", "must be a mapping"),
    ({"annotations": {"/x": "y"}}, "metadata.annotations[/x]", "prefix must be a lowercase DNS subdomain"),
    ({"annotations": {"big": "x" * (256 * 1024)}}, "metadata.annotations", "at most 256 KiB"),
])
def test_metadata_errors(meta, field, text):
    errors = metadata_errors(with_meta(**meta))
    assert [e.field for e in errors] == [field] and text in str(errors[0]), [str(e) for e in errors]


@pytest.mark.parametrize("meta", [
    {}, {"labels": {"trainyard.dev/priority-class": "training-high", "empty": ""}},
    {"annotations": {"note": "any text at all, spaces too"}}, {"namespace": "team-a"},
])
def test_valid_metadata_passes(meta):
    assert metadata_errors(with_meta(**meta)) == [] and unknown_metadata_errors(with_meta(**meta)) == []


def test_unknown_metadata_key_suggests_the_known_one():
    errors = unknown_metadata_errors(with_meta(lables={"a": "b"}))
    assert [e.field for e in errors] == ["metadata.lables"] and "did you mean 'labels'?" in str(errors[0])


def test_strict_problems_carry_metadata_problems_of_both_documents():
    rt = runtime()
    rt["metadata"]["labels"] = {"x": "bad value"}
    problems = strict_problems(with_meta(lables={}), rt)
    assert [e.field for e in problems["unknown"]] == ["metadata.lables"]
    assert [e.field for e in problems["errors"]] == ["metadata.labels[x]"]
