"""The training image's checkpoint helper, loaded from its source (tools/images/training/site) as the image has it."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from trainyard.paths import repo_root

SOURCE = repo_root() / "tools" / "images" / "training" / "site" / "trainyard_checkpoint.py"


def helper() -> ModuleType:
    if "trainyard_checkpoint" not in sys.modules:
        spec = importlib.util.spec_from_file_location("trainyard_checkpoint", SOURCE)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["trainyard_checkpoint"] = module
        spec.loader.exec_module(module)
    return sys.modules["trainyard_checkpoint"]
