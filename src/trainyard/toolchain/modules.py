"""Where a pinned Go module's files are: `go mod download` + `go list -m` in the tool's wrapper module.

Readers of upstream files (the Kubernetes OpenAPI index, JobSet and Volcano charts and CRDs, Trainer's
manifests) use this; only the builder (`recipes`, `build`) runs `go build`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from trainyard.toolchain.versions import Tool


def go_env() -> dict[str, str]:
    """Environment for reproducible offline-friendly builds (no toolchain download, no cgo)."""
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"})
    return env


def module_info(tool: Tool, module_path: str) -> dict:
    """`go list -m -json` for a module required by the wrapper (Version, Time, Origin)."""
    out = subprocess.run(
        ["go", "list", "-m", "-json", module_path],
        cwd=tool.wrapper_dir, env=go_env(), check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def module_dir(tool: Tool, module_path: str) -> Path:
    """Directory of a pinned module in the module cache, downloading (checked by go.sum) if needed."""
    subprocess.run(["go", "mod", "download", module_path], cwd=tool.wrapper_dir, env=go_env(), check=True,
                   capture_output=True, text=True)
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", module_path],
        cwd=tool.wrapper_dir, env=go_env(), check=True, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())
