"""Build recipes for the Pulumi CLI, its Python language host and the Kubernetes provider.

Both wrappers (tools/pulumi, tools/pulumi-kubernetes) pin their modules in a committed
go.sum; see the comments in their go.mod for why these versions (the Go proxy here only
serves module versions it already has). Version stamps are the variables upstream's own
release builds set (.goreleaser.yml for pulumi, the provider Makefile for the provider).
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from trainyard.toolchain import recipes
from trainyard.toolchain.modules import module_dir
from trainyard.toolchain.recipes import GoStep, PyStep, Step, copy_from_module
from trainyard.toolchain.versions import Tool

PULUMI_PKG = "github.com/pulumi/pulumi/pkg/v3"
PULUMI_SDK = "github.com/pulumi/pulumi/sdk/v3"
LANGUAGE_PYTHON = "github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3"
PULUMI_VERSION_VAR = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"

K8S_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"
K8S_VERSION_VAR = "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version"
K8S_CMD = "cmd/pulumi-resource-kubernetes"  # inside the provider module, and inside the wrapper

# Upstream release builds: static, pure-Go user lookup, no gRPC tracing (as .goreleaser.yml).
BUILD_TAGS = "osusergo,grpcnotrace"


def _ldflags(version_var: str, version: str) -> str:
    return f"-s -w -X {version_var}={version}"


def pulumi(tool: Tool) -> list[Step]:
    """`pulumi` and `pulumi-language-python` in one `go build` (they share most packages),
    then the language host's Python executor, which must sit next to it."""
    flags = _ldflags(PULUMI_VERSION_VAR, tool.version)  # the CLI expects the leading "v"
    # -o <dir>/ names each binary after its package: pulumi, pulumi-language-python (/v3 dropped).
    build = GoStep(("build", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", flags, "-o", str(tool.bin_dir) + "/",
                    f"{PULUMI_PKG}/cmd/pulumi", LANGUAGE_PYTHON))
    return [
        build,
        copy_from_module(tool, PULUMI_SDK, "python/cmd/pulumi-language-python-exec",
                         tool.bin_dir / "pulumi-language-python-exec"),
        # Not a listed binary: the provider for Python dynamic providers, shipped the same way.
        copy_from_module(tool, PULUMI_SDK, "python/dist/pulumi-resource-pulumi-python",
                         tool.bin_dir / "pulumi-resource-pulumi-python"),
    ]


def _make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _copy_provider_main(tool: Tool) -> PyStep:
    """Copy the provider's main package out of the read-only module cache into the wrapper."""
    dest = tool.wrapper_dir / K8S_CMD

    def action() -> None:
        source = module_dir(tool, K8S_PROVIDER) / K8S_CMD
        if dest.exists():
            _make_writable(dest)
            shutil.rmtree(dest)
        shutil.copytree(source, dest)
        _make_writable(dest)

    return PyStep(f"copy {K8S_PROVIDER}/{K8S_CMD} -> {dest}", action)


def pulumi_kubernetes(tool: Tool) -> list[Step]:
    """pulumi-resource-kubernetes: its main package embeds schema-embed.json and
    terraform-mapping-embed.json, which upstream generates (`go generate`) before building."""
    version = tool.version.lstrip("v")  # the provider's Makefile stamps VERSION_GENERIC, no "v"
    main_dir = tool.wrapper_dir / K8S_CMD
    return [
        _copy_provider_main(tool),
        GoStep(("run", "./generate.go"), env={"VERSION": version}, cwd=main_dir),
        GoStep(("build", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", _ldflags(K8S_VERSION_VAR, version),
                "-o", str(tool.bin_dir / "pulumi-resource-kubernetes"), f"./{K8S_CMD}")),
    ]


def pulumi_policy_analyzer(tool: Tool) -> list[Step]:
    """The analyzer plugin `pulumi preview --policy-pack` starts for Python packs: a script in the sdk module."""
    return [copy_from_module(tool, PULUMI_SDK, "python/dist/pulumi-analyzer-policy-python",
                             tool.bin_dir / "pulumi-analyzer-policy-python")]


recipes.register("pulumi", pulumi)
recipes.register("pulumi-kubernetes", pulumi_kubernetes)
recipes.register("pulumi-policy-analyzer", pulumi_policy_analyzer)
