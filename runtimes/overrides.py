"""Local overrides of rendered runtimes, for running a release where its images cannot be pulled (real nodes of a
local cluster): other images by values.yaml key, pods pinned to real nodes, and a name suffix so the copies sit
beside the tenant's pinned runtimes. Releases stay immutable: this changes rendered objects, never sources.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from trainyard import k8s as K
from trainyard.runtimes.model import CatalogError, Finding
from trainyard.runtimes.render import release_values
from trainyard.runtimes.model import Catalog

ALL_IMAGES = "all"


def parse_image_overrides(pairs: list[str], catalog: Catalog, version: str) -> dict[str, str]:
    """`KEY=IMAGE` options -> {release image ref: new ref}; KEY is a key of the release's `images` or `all`."""
    images = release_images(catalog, version)
    mapping: dict[str, str] = {}
    for pair in pairs:
        key, sep, image = pair.partition("=")
        if not sep or not image:
            raise CatalogError(Finding(f"--image {pair!r}: expected KEY=IMAGE",
                                       fix=f"for example --image {ALL_IMAGES}=trainyard.local/training:local"))
        if key == ALL_IMAGES:
            mapping.update({ref: image for ref in images.values()})
        elif key in images:
            mapping[images[key]] = image
        else:
            raise CatalogError(Finding(f"--image {pair!r}: release {version} has no image {key!r}",
                                       fix=f"use one of {', '.join(sorted(images))} or {ALL_IMAGES}"))
    return mapping


def release_images(catalog: Catalog, version: str) -> dict[str, str]:
    values = release_values(catalog.sources_of(version), version)
    images = values.get("images") or {}
    return {str(k): str(v) for k, v in images.items()} if isinstance(images, dict) else {}


def pod_specs(runtime: dict) -> list[dict]:
    """Every pod spec of a runtime's JobSet template."""
    jobs = ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or []
    return [job["template"]["spec"]["template"].setdefault("spec", {}) for job in jobs]


def name_names_the_model(runtime: dict) -> bool:
    """A torchtune runtime: the controller derives the model and config from its name (`torchtune-<model>-<size>`,
    as upstream), so a renamed copy is refused at admission ("invalid model configured")."""
    labels = (runtime.get("metadata") or {}).get("labels") or {}
    return labels.get(K.LABEL_FRAMEWORK) == "torchtune"


def refuse_renaming(runtime: dict, name_suffix: str) -> None:
    name = runtime["metadata"]["name"]
    raise CatalogError(Finding(f"--name-suffix {name_suffix!r} would make {name + name_suffix!r}, which the controller "
                               f"refuses: a torchtune runtime's name ({name}) names its model",
                               runtime=name, fix="render it without --name-suffix into a namespace of its own "
                                                 "(--namespace) instead"))


def override_runtime(runtime: dict, *, images: Mapping[str, str], node_selector: Mapping[str, str] | None = None,
                     tolerations: list[dict[str, Any]] | None = None, name_suffix: str = "") -> dict:
    """A copy of `runtime` with images swapped, pods pinned by `node_selector` and `tolerations`, and renamed."""
    if name_suffix and name_names_the_model(runtime):
        refuse_renaming(runtime, name_suffix)
    out = copy.deepcopy(runtime)
    out["metadata"]["name"] += name_suffix
    for spec in pod_specs(out):
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            container["image"] = images.get(container.get("image", ""), container.get("image"))
        if node_selector:
            spec.setdefault("nodeSelector", {}).update(node_selector)
        if tolerations:
            spec["tolerations"] = [*spec.get("tolerations", []), *tolerations]
    return out
