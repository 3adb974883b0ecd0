"""One explicit Kubernetes provider per stack: strict mode, server-side apply, no ambient kubeconfig."""

from __future__ import annotations

import os

import pulumi_kubernetes as k8s

from trainyard.platform.stack_config import StackConfig


def provider_args(config: StackConfig) -> dict:
    """Provider arguments; kubeconfig paths are expanded here so the stack file can say `~/...`."""
    kubeconfig = os.path.expandvars(os.path.expanduser(config.kubeconfig)) if config.kubeconfig else None
    args = {
        "enable_server_side_apply": True,
        "cluster_identifier": config.kube_context or "trainyard-local",
        "delete_unreachable": False,
    }
    if kubeconfig:
        args["kubeconfig"] = kubeconfig
    if config.kube_context:
        args["context"] = config.kube_context
    return args


def kubernetes_provider(config: StackConfig) -> k8s.Provider:
    return k8s.Provider("k8s", **provider_args(config))
