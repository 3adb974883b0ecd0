"""`trainyard cluster load-image`: an image trainyard builds, imported into every real node of a running cluster,
as `kind load` does. The controller image may be built from a release's files instead of the checkout's, to try
an upgrade from that release on a local cluster."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.spec import ClusterSpec
from trainyard.cluster.state import ClusterError, ClusterPaths, read_state
from trainyard.images import releases
from trainyard.images.build import RECIPES, ImageRecipe, build_image, controller_recipe
from trainyard.paths import repo_root
from trainyard.realnodes.nodes import process_name, require_root, import_image, real_nodes


def load_image(name: str, image: str, echo: Callable[[str], None], revision: str | None = None) -> dict:
    """Build `image` (one of images.build.RECIPES; with `revision`, the controller of that release or commit)
    unless cached, and import it into every real node of the cluster `name`; returns its record (`ref` is the
    immutable name to use)."""
    if image not in RECIPES:
        raise ClusterError(f"unknown image {image!r}; choose one of {', '.join(RECIPES)}")
    if revision and image != "controller":
        raise ClusterError(f"--revision builds the controller image only; drop it for {image!r}")
    state = read_state(name)
    spec = ClusterSpec(**state["spec"]) if state else None
    if spec is None or not spec.real_nodes:
        raise ClusterError(f"cluster {name!r} runs no real nodes; start it with "
                           f"`trainyard cluster up --name {name} --real-nodes N`")
    require_root()
    paths = ClusterPaths.for_name(name)
    running = ProcessTable(paths.root).running()
    with tempfile.TemporaryDirectory(prefix="trainyard-release-") as scratch:
        recipe = release_recipe(revision, Path(scratch)) if revision else RECIPES[image]()
        record = build_image(recipe, echo)
    for node in real_nodes(spec, paths):
        if process_name("containerd", node) not in running:
            raise ClusterError(f"the containerd of {node.name} is not running; restart the cluster")
        import_image(node, record, echo)
    return record


def release_recipe(revision: str, scratch: Path) -> ImageRecipe:
    """The controller recipe of a release (`previous`, `0.3.0`, `v0.3.0`) or commit, from its files in `scratch`."""
    repo = repo_root()
    commit, label = releases.resolve(repo, revision)
    return controller_recipe(releases.export_tree(repo, commit, scratch / "source"), release=label)
