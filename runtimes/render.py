"""Turn a release's sources into runtime objects: Jinja2 with StrictUndefined, parsed at once.

The rendered object here is the *base* runtime: the template plus the catalog
labels, before any status label. Its content hash is what the lock freezes, so
deprecating a release never changes it.
"""

from __future__ import annotations

import copy
import traceback
from typing import Any, Mapping

import jinja2

from trainyard import yaml_input
from trainyard.k8s import TRAINER_API_VERSION
from trainyard.runtimes import labels
from trainyard.problems import Problem
from trainyard.runtimes.model import VALUES_FILE, CatalogError, Finding, ReleaseSources

CLUSTER_KIND = "ClusterTrainingRuntime"

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


def release_values(sources: ReleaseSources, version: str) -> dict[str, Any]:
    """The parameters templates may use: ``values.yaml`` plus ``release.version``."""
    path = f"{sources.directory}/{VALUES_FILE}"
    try:
        values = yaml_input.load(sources.files.get(VALUES_FILE, ""), path) or {}
    except yaml_input.YamlInputError as err:
        where = f" (line {err.line})" if err.line else ""
        raise CatalogError(Finding(f"invalid YAML: {err.detail}{where}", file=path, release=version, fix=err.fix)) from None
    if not isinstance(values, dict):
        raise CatalogError(Finding("must be a mapping of parameters", file=path, release=version, fix="write key: value pairs"))
    if "release" in values:
        raise CatalogError(
            Finding("'release' is reserved for the catalog", file=path, release=version, fix="rename the parameter")
        )
    return {**values, "release": {"version": version}}


def render_template(text: str, values: Mapping[str, Any], *, file: str, runtime: str) -> dict:
    """Render one template and parse it into exactly one runtime object."""
    try:
        rendered = _ENV.from_string(text).render(values)
    except jinja2.UndefinedError as err:
        raise CatalogError(
            Finding(
                f"unknown placeholder{_template_line(err)}: {err.message}",
                file=file,
                runtime=runtime,
                fix="define it in the release's values.yaml or correct the placeholder name",
            )
        ) from None
    except jinja2.TemplateSyntaxError as err:
        raise CatalogError(
            Finding(f"template syntax error on line {err.lineno}: {err.message}", file=file, runtime=runtime, fix="correct the Jinja2 syntax")
        ) from None
    try:
        documents = [doc for doc in yaml_input.load_all(rendered, file) if doc is not None]
    except yaml_input.YamlInputError as err:
        where = f" (line {err.line})" if err.line else ""
        raise CatalogError(
            Finding(
                f"invalid YAML after rendering: {err.detail}{where}",
                file=file,
                runtime=runtime,
                fix="correct the indentation or quoting (placeholders are substituted as plain text)",
            )
        ) from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise CatalogError(
            Finding(
                f"must render to exactly one object, got {len(documents)} document(s)",
                file=file,
                runtime=runtime,
                fix="keep one runtime per file",
            )
        )
    obj = documents[0]
    _check_identity(obj, file=file, runtime=runtime)
    return obj


def _check_identity(obj: dict, *, file: str, runtime: str) -> None:
    """Stable names rest on these: the file stem is the runtime name in every release."""
    problems = []
    if obj.get("apiVersion") != TRAINER_API_VERSION or obj.get("kind") != CLUSTER_KIND:
        problems.append(
            Finding(
                f"must be apiVersion {TRAINER_API_VERSION}, kind {CLUSTER_KIND} (got {obj.get('apiVersion')}, {obj.get('kind')})",
                file=file,
                runtime=runtime,
                fix="write templates as ClusterTrainingRuntimes; tenant TrainingRuntimes are derived from them",
            )
        )
    name = (obj.get("metadata") or {}).get("name")
    if name != runtime:
        problems.append(
            Finding(
                f"metadata.name {name!r} does not match the file name",
                file=file,
                runtime=runtime,
                fix=f"set metadata.name: {runtime} or rename the file (names are stable across releases)",
            )
        )
    if not isinstance(obj.get("spec"), dict):
        problems.append(Finding("has no spec", file=file, runtime=runtime, fix="add spec.mlPolicy and spec.template"))
    if problems:
        raise CatalogError(*problems)


def stamp_catalog_labels(obj: dict, version: str) -> dict:
    """Record the release on the runtime and on the JobSet template (so every JobSet says where it came from)."""
    stamped = copy.deepcopy(obj)
    metadata = stamped["metadata"]
    metadata["labels"] = {**(metadata.get("labels") or {}), labels.CATALOG_VERSION: version, labels.CATALOG_RUNTIME: metadata["name"]}
    template = stamped["spec"].get("template") or {}
    template_metadata = template.get("metadata") or {}
    template_metadata["labels"] = {**(template_metadata.get("labels") or {}), labels.CATALOG_VERSION: version}
    stamped["spec"]["template"] = {"metadata": template_metadata, **{k: v for k, v in template.items() if k != "metadata"}}
    return stamped


def render_release_sources(sources: ReleaseSources, version: str) -> dict[str, dict]:
    """Every runtime of a release as base objects, by stable name; all errors at once."""
    findings: list[Problem] = []
    values = release_values(sources, version)
    rendered: dict[str, dict] = {}
    for runtime, text in sources.templates.items():
        try:
            obj = render_template(text, values, file=sources.path_of(runtime), runtime=runtime)
        except CatalogError as err:
            findings.extend(_with_release(f, version) for f in err.findings)
            continue
        rendered[runtime] = stamp_catalog_labels(obj, version)
    if not sources.templates:
        findings.append(
            Finding("has no runtime templates", file=sources.directory, release=version, fix="add <name>.yaml.j2 files")
        )
    if findings:
        raise CatalogError(*findings)
    return rendered


def _with_release(finding: Problem, version: str) -> Problem:
    return Finding(**{**finding.__dict__, "release": version})


def _template_line(err: Exception) -> str:
    """' on line N' of the template that raised, from Jinja's rewritten traceback."""
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if frame.filename == "<template>"]
    return f" on line {lines[-1]}" if lines else ""
