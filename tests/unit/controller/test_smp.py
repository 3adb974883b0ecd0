"""Strategic merge patch: table of merge/replace/delete/ordering behaviours."""

import pytest

from trainyard.controller.errors import BuildError
from trainyard.controller.smp import POD_MERGE_KEYS, strategic_merge


def env(*names):
    return [{"name": n, "value": n.lower()} for n in names]


CASES = [
    ("upstream env order: patch-only before runtime-only",
     {"env": env("INIT_ENV", "DATASET_PATH")}, {"env": env("INIT_ENV", "NEW_VALUE")},
     ["INIT_ENV", "NEW_VALUE", "DATASET_PATH"]),
    ("runtime-only item earlier than a patched item stays first",
     {"env": env("A", "B", "C")}, {"env": env("C", "D")}, ["A", "B", "C", "D"]),
    ("patch reorders items that exist in both",
     {"env": env("A", "B")}, {"env": env("B", "A")}, ["B", "A"]),
    ("new items appended when the original is empty",
     {}, {"env": env("X", "Y")}, ["X", "Y"]),
    ("delete directive removes by merge key",
     {"env": env("A", "B", "C")}, {"env": [{"name": "B", "$patch": "delete"}]}, ["A", "C"]),
    ("replace directive replaces the whole list",
     {"env": env("A", "B")}, {"env": [{"$patch": "replace"}, {"name": "Z", "value": "z"}]}, ["Z"]),
    ("interleave (mergeSortedSlice): runtime [A,B,C,D], patch [C,E,A] -> [B,C,E,A,D]",
     {"env": env("A", "B", "C", "D")}, {"env": env("C", "E", "A")}, ["B", "C", "E", "A", "D"]),
]


@pytest.mark.parametrize("title,original,patch,expected", CASES, ids=[c[0] for c in CASES])
def test_env_list_ordering(title, original, patch, expected):
    merged = strategic_merge(original, patch, POD_MERGE_KEYS)
    assert [e["name"] for e in merged["env"]] == expected


@pytest.mark.parametrize("field,original,patch,expected", [
    ("tolerations (atomic) are replaced", [{"key": "a"}, {"key": "b"}], [{"key": "c"}], [{"key": "c"}]),
    ("args are replaced", ["--a", "--b"], ["--c"], ["--c"]),
])
def test_lists_without_merge_key_are_replaced(field, original, patch, expected):
    key = field.split()[0]
    assert strategic_merge({key: original}, {key: patch}, POD_MERGE_KEYS)[key] == expected


def test_maps_merge_per_key_and_null_deletes():
    merged = strategic_merge({"nodeSelector": {"a": "1", "b": "2"}}, {"nodeSelector": {"b": None, "c": "3"}})
    assert merged == {"nodeSelector": {"a": "1", "c": "3"}}


def test_item_merge_is_recursive_and_keeps_fields():
    original = {"containers": [{"name": "node", "image": "i", "env": env("A")}, {"name": "side", "image": "s"}]}
    patch = {"containers": [{"name": "node", "env": env("B"), "volumeMounts": [{"name": "v", "mountPath": "/m"}]}]}
    merged = strategic_merge(original, patch, POD_MERGE_KEYS)
    assert [c["name"] for c in merged["containers"]] == ["node", "side"]
    node = merged["containers"][0]
    assert node["image"] == "i" and [e["name"] for e in node["env"]] == ["B", "A"]  # patch-only first
    assert node["volumeMounts"] == [{"name": "v", "mountPath": "/m"}]


def test_volume_mounts_merge_by_mount_path():
    original = {"volumeMounts": [{"name": "a", "mountPath": "/x"}]}
    merged = strategic_merge(original, {"volumeMounts": [{"name": "b", "mountPath": "/x"}]}, POD_MERGE_KEYS)
    assert merged["volumeMounts"] == [{"name": "b", "mountPath": "/x"}]


def test_inputs_are_not_modified():
    original, patch = {"env": env("A")}, {"env": env("B")}
    strategic_merge(original, patch, POD_MERGE_KEYS)
    assert original == {"env": env("A")} and patch == {"env": env("B")}


def test_item_without_merge_key_is_an_error():
    with pytest.raises(BuildError, match="merge key 'name'"):
        strategic_merge({"env": env("A")}, {"env": [{"value": "x"}]}, POD_MERGE_KEYS)
