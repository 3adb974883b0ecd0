"""Builders for catalog tests: small in-memory releases, tenants and catalogs (unique module name: tests import it)."""

from __future__ import annotations

from pathlib import Path

from trainyard.runtimes.lint import load_controller_checks
from trainyard.runtimes.lock import empty_lock, lock_entry, with_release
from trainyard.runtimes.model import CatalogTenant
from trainyard.runtimes.model import Catalog, Release, ReleaseSources
from trainyard.runtimes.render import render_release_sources
import trainyard.runtimes

SHIPPED = Path(trainyard.runtimes.__file__).resolve().parent
"""The catalog shipped in the checkout (runtimes/), regardless of $TRAINYARD_CATALOG_DIR."""

TORCH_TEMPLATE = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: {name}
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {{}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: {{{{ images.torch }}}}
"""


def make_sources(version: str, templates: dict[str, str] | None = None, values: str = "images:\n  torch: pytorch/pytorch:2.13.0\n") -> ReleaseSources:
    """A release directory in memory: ``templates`` maps runtime name -> template text."""
    templates = templates if templates is not None else {"torch-distributed": TORCH_TEMPLATE.format(name="torch-distributed")}
    files = {f"{name}.yaml.j2": text for name, text in templates.items()}
    files["values.yaml"] = values
    return ReleaseSources(directory=f"releases/{version}", files=files)


def make_catalog(*releases: Release, sources: dict[str, ReleaseSources] | None = None, frozen: bool = True) -> Catalog:
    """A catalog whose released versions are frozen in the lock (as `catalog release` would leave it)."""
    sources = sources if sources is not None else {r.version: make_sources(r.version) for r in releases}
    lock = empty_lock()
    if frozen:
        for release in releases:
            if release.released and release.version in sources:
                src = sources[release.version]
                lock = with_release(lock, release.version, lock_entry(src, render_release_sources(src, release.version)))
    return Catalog(releases=tuple(releases), sources=sources, lock=lock)


def make_tenant(**overrides) -> CatalogTenant:
    fields = {"name": "team-a", "namespace": "team-a", "catalog_version": "1.1.0", "queue": "team-a", "priority_class": "team-a-default"}
    return CatalogTenant(**{**fields, **overrides})


def snapshot(root: Path) -> dict[str, str]:
    """Every file under a directory, to prove a failed command changed nothing."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the real controller checks (CRD schema, runtime admission, sample build) -----------------------

CHECKS = load_controller_checks()
"""What ``trainyard catalog lint`` uses; raises (failing collection loudly) if trainyard.controller cannot be imported."""
