"""The comparison itself (no cluster): what normalization removes, how differences are named, how the
allow-list matches them and counts its matches."""

from __future__ import annotations

import base64

import pytest

from diff_compare import (Allowed, Difference, MISSING, compare_case, diff_values, load_allow_list,
                          normalize_object, secret_shape, unexplained)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_server_written_metadata_timestamps_and_namespace_are_removed():
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "tj-x", "namespace": "diff-upstream", "uid": "u", "resourceVersion": "7",
                        "generation": 3, "creationTimestamp": "2026-11-23T17:47:02Z", "managedFields": [{}],
                        "ownerReferences": [{"kind": "TrainJob", "name": "tj", "uid": "u2", "controller": True}]},
           "data": {"k": "host.tj.diff-upstream.svc"}}
    assert normalize_object(obj, "diff-upstream") == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "tj-x", "namespace": "<namespace>",
                     "ownerReferences": [{"kind": "TrainJob", "name": "tj", "controller": True}]},
        "data": {"k": "host.tj.<namespace>.svc"}}


def test_condition_times_go_and_conditions_are_keyed_by_type():
    up = {"kind": "TrainJob", "metadata": {"name": "tj"}, "status": {"conditions": [
        {"type": "Suspended", "status": "True", "lastTransitionTime": "2026-11-23T17:47:02Z"}]}}
    ty = {"kind": "TrainJob", "metadata": {"name": "tj"}, "status": {"conditions": [
        {"type": "Suspended", "status": "False", "lastTransitionTime": "2026-11-23T18:00:00Z"}]}}
    (diff,) = compare_case("tj", [normalize_object(up)], [normalize_object(ty)])
    assert (diff.path, diff.side, diff.upstream, diff.trainyard) == (
        "TrainJob/<trainjob>:status.conditions[Suspended].status", "both", "True", "False")


def test_random_keys_are_compared_by_shape():
    pem = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"
    assert secret_shape(_b64(pem)) == "<PEM EC PRIVATE KEY>"
    assert secret_shape(_b64("ecdsa-sha2-nistp521 AAAAE2VjZHNh\n")) == "<ssh public key ecdsa-sha2-nistp521>"
    one = {"kind": "Secret", "metadata": {"name": "tj-mpi-ssh-auth"}, "data": {"ssh-privatekey": _b64(pem)}}
    other = {**one, "data": {"ssh-privatekey": _b64(pem.replace("MHcCAQEE", "OTHERKEY"))}}
    assert compare_case("tj", [normalize_object(one)], [normalize_object(other)]) == []


def test_embedded_runtime_snapshot_is_compared_as_an_object():
    snap = lambda uid: {"kind": "ConfigMap", "metadata": {"name": "tj-runtime-snapshot"},  # noqa: E731
                        "data": {"runtime": f"apiVersion: v1\nkind: X\nmetadata:\n  uid: {uid}\n  name: r\n"}}
    assert compare_case("tj", [normalize_object(snap("a"))], [normalize_object(snap("b"))]) == []


@pytest.mark.parametrize("up,ty,expected", [
    ({}, MISSING, []), ([], MISSING, []),  # Go writes empty structs, Python leaves them out
    ({"limits": {"nvidia.com/gpu": 1}}, {"limits": {"nvidia.com/gpu": "1"}}, []),
    ({"a": 1}, {"b": 1}, [("x.a", "upstream"), ("x.b", "trainyard")]),
    ([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"name": "a"}], [("x.$order", "both")]),
])
def test_diff_values(up, ty, expected):
    out = []
    norm = lambda v: v if v is MISSING else normalize_object({"x": v})["x"]  # noqa: E731
    diff_values(norm(up), norm(ty), "x", out)
    assert [(p, s) for p, s, _, _ in out] == expected


def test_allow_list_globs_sides_cases_and_when():
    diffs = [Difference("gen-1", "JobSet/<trainjob>:spec.replicatedJobs[node].x", "trainyard"),
             Difference("gen-1", "JobSet/<trainjob>:status", "trainyard"),
             Difference("gen-2", "JobSet/<trainjob>:status", "trainyard")]
    entries = [Allowed("JobSet/<trainjob>:spec.replicatedJobs[*].x", "trainyard", "r"),
               Allowed("JobSet/<trainjob>:status", "trainyard", "r", when="*replicatedJobs[*].x"),
               Allowed("JobSet/<trainjob>:spec.*", "upstream", "r"),
               Allowed("JobSet/<trainjob>:status", "any", "r", cases="gen-3|gen-4")]
    assert unexplained(diffs, entries) == [diffs[2]]
    assert [e.matched for e in entries] == [1, 1, 0, 0]


def test_the_allow_list_file_is_well_formed():
    entries = load_allow_list()
    assert entries and all(e.reason.strip() for e in entries)
    assert len({(e.path, e.side, e.cases) for e in entries}) == len(entries), "no duplicate entries"
