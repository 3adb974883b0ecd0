"""Upstream's Flux script templates, as the toolchain installs them: the controller's Flux policy is given these
texts by whoever runs a build (the pure build pipeline reads no files).

`trainyard tools build kubeflow-trainer` copies them from the pinned `github.com/kubeflow/trainer/v2` module into
the tool's bin dir (`flux/<file>`); `TRAINYARD_FLUX_TEMPLATES` points at another directory holding them (the
controller image does that).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

TEMPLATE_FILES = ("broker.toml", "entrypoint.sh", "init.sh")
TEMPLATES_ENV = "TRAINYARD_FLUX_TEMPLATES"


def template_dir() -> Path:
    """$TRAINYARD_FLUX_TEMPLATES, else the built kubeflow-trainer tool's `flux/` folder."""
    directory = os.environ.get(TEMPLATES_ENV)
    if directory:
        return Path(directory)
    from trainyard.toolchain.versions import tool

    return tool("kubeflow-trainer").bin_dir / "flux"


@lru_cache(maxsize=1)
def read_flux_templates() -> dict[str, str]:
    """File name -> text of each template; FileNotFoundError (naming the fix) when one is missing. Only a complete
    set is cached: a build after `tools build` finds them."""
    directory = template_dir()
    texts = {}
    for name in TEMPLATE_FILES:
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"the Flux templates are not installed ({path} is missing); run "
                                    f"`trainyard tools build kubeflow-trainer` or set {TEMPLATES_ENV}")
        texts[name] = path.read_text(encoding="utf-8")
    return texts
