"""Normalize what each controller produced for one TrainJob and list the differences; match them against the
allow-list (tests/differential/allowed_differences.yaml).

A difference is (case, path, side): `path` is `<Kind>/<name>:<dotted.field.path>` with the TrainJob's name in
object names written `<trainjob>`, list items of named/typed elements written `[name]`; `side` says which
controller has the value: `upstream` (only upstream's output has it), `trainyard` (only trainyard's), `both`
(both have it, with different values).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ALLOW_LIST = Path(__file__).with_name("allowed_differences.yaml")
DROPPED_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink",
                    "deletionTimestamp", "deletionGracePeriodSeconds")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
PEM = re.compile(r"^-----BEGIN ([A-Z0-9 ]+)-----\n")
SSH_PUBLIC = re.compile(r"^((?:ssh|ecdsa|sk)-[a-z0-9@.-]+) [A-Za-z0-9+/=]+")
MISSING = object()
SUMMARY: list[str] = []  # one line of figures per run, printed by conftest's pytest_terminal_summary
QUANTITY_MAPS = ("limits", "requests", "minResources")


@dataclass(frozen=True)
class Difference:
    case: str
    path: str
    side: str  # upstream | trainyard | both
    upstream: object = None
    trainyard: object = None

    def __str__(self) -> str:
        return f"{self.case}: {self.path} [{self.side}] upstream={_short(self.upstream)} trainyard={_short(self.trainyard)}"


def _short(value: object, limit: int = 160) -> str:
    text = "-" if value is MISSING or value is None else yaml.safe_dump(value, default_flow_style=True, width=10**6)
    text = text.strip().removesuffix("\n...").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _drop_timestamps(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_timestamps(v) for k, v in value.items()
                if not (isinstance(v, str) and TIMESTAMP.match(v)) and k not in ("managedFields",)}
    if isinstance(value, list):
        return [_drop_timestamps(v) for v in value]
    return value


def _replace_text(value: object, old: str, new: str) -> object:
    if isinstance(value, dict):
        return {_replace_text(k, old, new): _replace_text(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_text(v, old, new) for v in value]
    if isinstance(value, str) and old in value:
        return value.replace(old, new)
    return value


def normalize_metadata(meta: dict, field_managers: tuple[str, ...] = ()) -> dict:
    out = {k: v for k, v in meta.items() if k not in DROPPED_METADATA}
    if out.get("ownerReferences"):
        out["ownerReferences"] = [{k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]]
    return out


def secret_shape(value: str) -> str:
    """Random material by shape: a PEM block by its type, an SSH public key by its algorithm, else the text."""
    try:
        text = base64.b64decode(value).decode()
    except (ValueError, UnicodeDecodeError):
        return f"<binary {len(value)} base64 chars>"
    if m := PEM.match(text):
        return f"<PEM {m.group(1)}>"
    if m := SSH_PUBLIC.match(text):
        return f"<ssh public key {m.group(1)}>"
    return text


def _embedded_object(text: str) -> object:
    """ConfigMap values that hold a Kubernetes object (the runtime snapshot) are compared as objects."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
        return normalize_object(doc)
    return text


def normalize_object(obj: dict, namespace: str | None = None) -> dict:
    obj = dict(obj)
    if "metadata" in obj:
        obj["metadata"] = normalize_metadata(obj["metadata"])
    if obj.get("kind") == "Secret":
        obj["data"] = {k: secret_shape(v) for k, v in (obj.get("data") or {}).items()}
    if obj.get("kind") == "ConfigMap":
        obj["data"] = {k: _embedded_object(v) for k, v in (obj.get("data") or {}).items()}
    if obj.get("kind") == "PodGroup":
        obj.pop("status", None)  # Volcano's scheduler writes it (Pending/Inqueue by timing), not the controller
    obj = _quantities_as_strings(_drop_timestamps(obj))
    if namespace:
        obj = _replace_text(obj, namespace, "<namespace>")
    return obj


def _list_key(items: list) -> str | None:
    for key in ("name", "type"):
        if items and all(isinstance(i, dict) and isinstance(i.get(key), str) for i in items):
            if len({i[key] for i in items}) == len(items):
                return key
    return None


def _empty(value: object) -> bool:
    return value is MISSING or value == {} or value == []


def _quantities_as_strings(value: object) -> object:
    """`nvidia.com/gpu: 1` and `nvidia.com/gpu: "1"` are the same quantity (the API server keeps what the
    writer sent in custom resources: Go writes strings, trainyard passes the runtime's integers through)."""
    if isinstance(value, dict):
        return {k: ({n: str(q) if isinstance(q, (int, float)) and not isinstance(q, bool) else q for n, q in v.items()}
                    if k in QUANTITY_MAPS and isinstance(v, dict) else _quantities_as_strings(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_quantities_as_strings(v) for v in value]
    return value


def diff_values(up: object, ty: object, path: str, out: list[tuple[str, str, object, object]]) -> None:
    """An absent field, an empty object and an empty list are the same (Go's encoder writes `metadata: {}`,
    `resources: {}` for empty structs, Python's builder leaves them out or writes `env: []`; the API server
    treats them alike)."""
    if up == ty or (_empty(up) and _empty(ty)):
        return
    if up is MISSING or ty is MISSING:
        out.append((path, "upstream" if ty is MISSING else "trainyard", up, ty))
        return
    if isinstance(up, dict) and isinstance(ty, dict):
        for key in sorted(set(up) | set(ty), key=str):
            diff_values(up.get(key, MISSING), ty.get(key, MISSING), f"{path}.{key}" if path else str(key), out)
        return
    if isinstance(up, list) and isinstance(ty, list):
        keys = {_list_key(items) for items in (up, ty) if items}
        key = keys.pop() if len(keys) == 1 else None
        if key:
            ups, tys = {i[key]: i for i in up}, {i[key]: i for i in ty}
            common_up = [i[key] for i in up if i[key] in tys]
            common_ty = [i[key] for i in ty if i[key] in ups]
            if common_up != common_ty:
                out.append((f"{path}.$order", "both", common_up, common_ty))
            for name in list(ups) + [n for n in tys if n not in ups]:
                diff_values(ups.get(name, MISSING), tys.get(name, MISSING), f"{path}[{name}]", out)
            return
        if len(up) == len(ty):
            for index, (a, b) in enumerate(zip(up, ty)):
                diff_values(a, b, f"{path}[{index}]", out)
            return
    out.append((path, "both", up, ty))


def objects_by_key(objects: list[dict], trainjob: str) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name'].replace(trainjob, '<trainjob>')}": o for o in objects}


def compare_case(case: str, upstream: list[dict], trainyard: list[dict]) -> list[Difference]:
    """Differences between the normalized objects each controller produced for TrainJob `case`."""
    ups, tys = objects_by_key(upstream, case), objects_by_key(trainyard, case)
    found: list[tuple[str, str, object, object]] = []
    for key in sorted(set(ups) | set(tys)):
        if key not in tys or key not in ups:
            found.append((f"{key}:", "upstream" if key in ups else "trainyard", ups.get(key, MISSING),
                          tys.get(key, MISSING)))
            continue
        diff_values(ups[key], tys[key], "", sub := [])
        found += [(f"{key}:{path}", side, a, b) for path, side, a, b in sub]
    return [Difference(case, path, side, a, b) for path, side, a, b in found]


# --------------------------------------------------------------------------- allow-list
@dataclass
class Allowed:
    path: str
    side: str
    reason: str
    cases: str = "*"
    when: str | None = None  # only in a TrainJob that also has a difference whose path matches this
    flaky: bool = False  # upstream is not deterministic there: the entry may match nothing in a run
    matched: int = 0

    def matches(self, diff: Difference, case_paths: set[str] = frozenset()) -> bool:
        return (_glob(self.path).fullmatch(diff.path) is not None and self.side in (diff.side, "any")
                and any(_glob(c).fullmatch(diff.case) for c in self.cases.split("|"))
                and (self.when is None or any(_glob(self.when).fullmatch(p) for p in case_paths)))


def _glob(pattern: str) -> re.Pattern:
    """`*` matches anything (dots and brackets included); every other character is literal."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def load_allow_list(path: Path = ALLOW_LIST) -> list[Allowed]:
    entries = yaml.safe_load(path.read_text())["allowed"]
    out = []
    for entry in entries:
        unknown = set(entry) - {"path", "side", "reason", "cases", "when", "flaky"}
        assert not unknown, f"{path.name}: unknown keys {unknown} in {entry}"
        assert entry.get("reason"), f"{path.name}: entry {entry['path']} has no reason"
        assert entry["side"] in ("upstream", "trainyard", "both", "any"), entry
        out.append(Allowed(entry["path"], entry["side"], entry["reason"], entry.get("cases", "*"), entry.get("when"),
                           bool(entry.get("flaky", False))))
    return out


def unexplained(differences: list[Difference], allowed: list[Allowed]) -> list[Difference]:
    """Differences no entry allows; counts each entry's matches (stale entries match nothing)."""
    paths: dict[str, set[str]] = {}
    for diff in differences:
        paths.setdefault(diff.case, set()).add(diff.path)
    left = []
    for diff in differences:
        hits = [entry for entry in allowed if entry.matches(diff, paths[diff.case])]
        for entry in hits:
            entry.matched += 1
        if not hits:
            left.append(diff)
    return left
