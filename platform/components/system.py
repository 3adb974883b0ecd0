"""Cluster-wide components: CRDs, JobSet, Volcano, the scheduling policy and trainyard's controller.

With `controllersRunLocally` (the local stack) the JobSet, Volcano and trainyard controllers are
processes started by `trainyard cluster up`, so no Deployments or charts are registered here.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainyard.controller.crds import crd_objects
from trainyard.k8s import part_of_trainyard
from trainyard.platform import controller_objects as ctl
from trainyard.platform import upstream
from trainyard.platform.components.kube import child, register, with_crd_await
from trainyard.platform.stack_config import StackConfig
from trainyard.platform.tokens import type_token
from trainyard.queues.hypernodes import render_hypernodes
from trainyard.queues.priority_classes import render_priority_class
from trainyard.queues.scheduler_config import CONFIGMAP_NAMESPACE, render, scheduler_configmap
from trainyard.queues.volcano_queues import render_queue

CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
JOBSET_NAMESPACE = "jobset-system"


def crd_policy(protect: bool, retain: bool):
    """A transform giving a chart's CRDs the same protect/retain policy as the platform's own CRDs (deleting a CRD
    deletes every object of its kind cluster-wide, users' jobs too), and the PodGroup CRD the selectable phase the
    local stack's copy has (`upstream.with_selectable_phase`)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != CRD_TYPE:
            return None
        policy = pulumi.ResourceOptions(protect=protect, retain_on_delete=retain)
        return pulumi.ResourceTransformResult(upstream.with_selectable_phase(dict(args.props)),
                                              pulumi.ResourceOptions.merge(args.opts, policy))

    return transform


def chart_namespace(name: str, parent: pulumi.Resource) -> pulumi.Resource:
    """Helm charts do not create their release namespace (`helm --create-namespace` does); we do."""
    return register({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": part_of_trainyard()}},
                    child(parent))


class Crds(pulumi.ComponentResource):
    """Every CRD the platform needs, registered first; everything else depends on this component."""

    def __init__(self, name: str, config: StackConfig, crds: list[dict], opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("platform", "Crds"), name, None, opts)
        self.names = [crd["metadata"]["name"] for crd in crds]
        for crd in crds:
            register(with_crd_await(crd), child(self, protect=config.policies.protect_crds,
                                                retain_on_delete=config.policies.retain_crds))
        self.register_outputs({"names": self.names})


class JobSet(pulumi.ComponentResource):
    """JobSet's controller, RBAC and webhooks from its pinned chart (CRDs come from Crds)."""

    def __init__(self, name: str, config: StackConfig, chart_dir: Path | None, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("platform", "JobSet"), name, None, opts)
        if not config.controllers_run_locally and chart_dir is not None:
            repository, _, tag = config.upstream.jobset_image.rpartition(":")
            namespace = chart_namespace(JOBSET_NAMESPACE, self)
            k8s.helm.v4.Chart(f"{name}-chart", chart=str(chart_dir), namespace=JOBSET_NAMESPACE, skip_crds=True,
                              values={"image": {"repository": repository, "tag": tag}}, opts=child(self, [namespace]))
        self.register_outputs({})


class Volcano(pulumi.ComponentResource):
    """Volcano: scheduler config, CEL admission policies; scheduler/controllers from the pinned chart in-cluster.

    The chart's admission webhook needs a certificate from a Helm hook Pulumi drops, so admission is
    disabled and Volcano's ValidatingAdmissionPolicies are used instead (no process, no cert).
    """

    def __init__(self, name: str, config: StackConfig, policies: list[dict], chart_dir: Path | None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("platform", "Volcano"), name, None, opts)
        namespace: pulumi.Resource
        if config.controllers_run_locally or chart_dir is None:
            namespace = register({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONFIGMAP_NAMESPACE}},
                                 child(self))
            self.scheduler_config = register(scheduler_configmap(config.scheduler), child(self, [namespace]))
            for policy in policies:
                register(policy, child(self))
        else:
            namespace = chart_namespace(CONFIGMAP_NAMESPACE, self)
            crd_settings = config.policies
            k8s.helm.v4.Chart(f"{name}-chart", chart=str(chart_dir), namespace=CONFIGMAP_NAMESPACE, name="volcano",
                              values={
                                  "basic": {"image_registry": config.upstream.volcano_registry,
                                            "image_tag_version": config.upstream.volcano_tag},
                                  "custom": {"admission_enable": False, "vap_enable": True,
                                             "scheduler_config_override": render(config.scheduler)},
                              },
                              opts=child(self, [namespace],
                                         transforms=[crd_policy(crd_settings.protect_crds, crd_settings.retain_crds)]))
        self.register_outputs({"schedulerConfig": render(config.scheduler)})


class Scheduling(pulumi.ComponentResource):
    """PriorityClasses, parent queues and the HyperNode tree, from stack config."""

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("queues", "Scheduling"), name, None, opts)
        for priority_class in config.priority_classes:
            register(render_priority_class(priority_class), child(self))
        parents: dict[str, pulumi.Resource] = {}
        for queue in config.parent_queues:
            deps = [parents[queue.parent]] if queue.parent in parents else []
            parents[queue.name] = register(render_queue(queue), child(self, deps))
        self.parent_queues = parents
        racks: list[pulumi.Resource] = []
        for hypernode in render_hypernodes(config.topology):
            is_rack = hypernode["spec"]["tier"] == 1
            resource = register(hypernode, child(self, [] if is_rack else racks))
            if is_rack:
                racks.append(resource)
        self.register_outputs({"priorityClasses": [p.name for p in config.priority_classes],
                               "hyperNodes": [h["metadata"]["name"] for h in render_hypernodes(config.topology)]})


class TrainyardController(pulumi.ComponentResource):
    """trainyard's TrainJob controller: RBAC and Lease namespace always; Deployment only in-cluster;
    its admission registration in URL mode (local processes) or service mode."""

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("platform", "Controller"), name, None, opts)
        spec = config.controller
        namespace = register(ctl.render_controller_namespace(spec), child(self))
        in_namespace = child(self, [namespace])
        for obj in ctl.render_controller_rbac(spec):
            register(obj, in_namespace)
        self._register_sdk_public_info(spec, namespace)
        ready: list[pulumi.Resource] = []
        if not config.controllers_run_locally:
            client_ca = (Path(spec.webhook.client_ca_file).expanduser().read_text(encoding="utf-8")
                         if spec.webhook.client_ca_file else None)
            for obj in (ctl.render_webhook_cert_request(spec) + ctl.render_controller_services(spec)
                        + ctl.render_pod_disruption_budget(spec) + ctl.render_webhook_client_ca(spec, client_ca)):
                register(obj, in_namespace)
            ready.append(register(ctl.render_controller_deployment(spec), in_namespace))
        ca_pem = None
        if spec.webhook.ca_bundle_file:
            ca_pem = Path(spec.webhook.ca_bundle_file).expanduser().read_text(encoding="utf-8")
        self.webhook = register(ctl.render_controller_webhook(spec, ca_pem), child(self, ready))
        self.register_outputs({"namespace": spec.namespace, "image": spec.image, "sdkNamespace": spec.sdk_namespace})

    def _register_sdk_public_info(self, spec, controller_namespace: pulumi.Resource) -> None:
        objects = ctl.render_sdk_public_info(spec)
        sdk_namespace: pulumi.Resource
        if objects[0]["kind"] == "Namespace":
            sdk_namespace = register(objects.pop(0), child(self))
        else:
            sdk_namespace = controller_namespace
        for obj in objects:
            register(obj, child(self, [sdk_namespace]))


def upstream_inputs(config: StackConfig) -> dict:
    """Read the pinned modules once (CRDs, policies, chart paths) for the components above."""
    trainyard_crds = crd_objects()
    jobset_crds = upstream.jobset_crds()
    local = config.controllers_run_locally
    return {
        # In-cluster, Volcano's chart installs its CRDs from the same pinned module (they are templates there).
        "crds": trainyard_crds + jobset_crds + (upstream.volcano_crds() if local else []),
        "volcano_policies": upstream.volcano_admission_policies() if local else [],
        "jobset_chart": None if local else upstream.jobset_chart(),
        "volcano_chart": None if local else upstream.volcano_chart(),
    }
