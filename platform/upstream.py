"""Upstream manifests, read only from the pinned Go modules in the module cache (never committed).

`module_dir` checks every download against the wrapper module's go.sum, so what Pulumi applies is
exactly the pinned JobSet/Volcano release. The parsing and selection below are pure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml

from trainyard import k8s as K
from trainyard.yaml_input import FAST_SAFE_LOADER

JOBSET_MODULE = "sigs.k8s.io/jobset"
VOLCANO_MODULE = "volcano.sh/volcano"
JOBSET_CRD_DIR = "config/components/crd/bases"
VOLCANO_CRD_DIR = "config/crd/volcano/bases"
VOLCANO_CHART_DIR = "installer/helm/chart/volcano"
JOBSET_CHART_DIR = "charts/jobset"
VOLCANO_POLICIES = ("queues-validating.yaml", "podgroups-validating.yaml", "hypernodes-validating.yaml")
"""Volcano's own CEL admission policies for the objects we use (instead of its hook-created webhook cert)."""


def documents(texts: Iterable[str]) -> list[dict]:
    """Every non-empty YAML document of the given texts (pinned upstream manifests), in order."""
    return [doc for text in texts for doc in yaml.load_all(text, Loader=FAST_SAFE_LOADER) if isinstance(doc, dict)]


def crds_only(docs: Iterable[dict]) -> list[dict]:
    return [doc for doc in docs if doc.get("kind") == "CustomResourceDefinition"]


def module_root(tool_name: str, module: str) -> Path:
    """The pinned module's directory (downloads through the go.sum-checked wrapper module if needed)."""
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    return module_dir(tool(tool_name), module)


def _read(directory: Path, names: Iterable[str] | None = None) -> list[str]:
    paths = [directory / name for name in names] if names else sorted(directory.glob("*.yaml"))
    return [path.read_text(encoding="utf-8") for path in paths]


def jobset_crds(root: Path | None = None) -> list[dict]:
    root = root or module_root("jobset", JOBSET_MODULE)
    return crds_only(documents(_read(root / JOBSET_CRD_DIR)))


def volcano_crds(root: Path | None = None) -> list[dict]:
    root = root or module_root("volcano", VOLCANO_MODULE)
    return [with_selectable_phase(crd) for crd in crds_only(documents(_read(root / VOLCANO_CRD_DIR)))]


POD_GROUP_CRD = f"{K.PODGROUPS}.{K.VOLCANO_GROUP}"
PHASE_FIELD = ".status.phase"


def with_selectable_phase(crd: dict) -> dict:
    """Volcano's PodGroup CRD with `.status.phase` as a selectable field (CRD field selectors, GA in Kubernetes
    1.32), any other CRD as it is. Volcano's CRD has none, so every reader of PodGroups got the finished ones too;
    `trainyard report` and `fit` ask for `status.phase!=Completed` (a third of the PodGroups, and growing, on a busy
    platform). Volcano itself reads them from its informer and is unaffected."""
    if (crd.get("metadata") or {}).get("name") != POD_GROUP_CRD:
        return crd
    versions = []
    for version in (crd.get("spec") or {}).get("versions") or []:
        fields = list(version.get("selectableFields") or [])
        if {"jsonPath": PHASE_FIELD} not in fields:
            fields.append({"jsonPath": PHASE_FIELD})
        versions.append({**version, "selectableFields": fields})
    return {**crd, "spec": {**crd["spec"], "versions": versions}}


def volcano_admission_policies(root: Path | None = None) -> list[dict]:
    root = root or module_root("volcano", VOLCANO_MODULE)
    return documents(_read(root / VOLCANO_CHART_DIR / "policy", VOLCANO_POLICIES))


def jobset_chart(root: Path | None = None) -> Path:
    return (root or module_root("jobset", JOBSET_MODULE)) / JOBSET_CHART_DIR


def volcano_chart(root: Path | None = None) -> Path:
    return (root or module_root("volcano", VOLCANO_MODULE)) / VOLCANO_CHART_DIR
