"""Stack rules over the controller's settings (`trainyard:controller.*`), part of `stack_validation.RULES`.

Replicas, the image pin, feature gates, the admission webhook and its serving certificate, the cluster a stack of
local controllers may target, and how the controller enforces (stall detection, reclaim, the Prometheus that
budgets are measured against). Like every rule, each returns problems naming the stack file, field and fix.
"""

from __future__ import annotations

import re

from trainyard.controller.feature_gates import parse_feature_gates
from trainyard.platform.problems import WARNING, ConfigProblem
from trainyard.platform.stack_config import NAMESPACE, WEBHOOK_CERTIFICATE_SOURCES, StackConfig
from trainyard.tenant_policy import RECLAIM_CHOICES, STALL_ACTIONS


def check_controller_enforcement(config: StackConfig) -> list[ConfigProblem]:
    """How the controller enforces: stall detection (minutes >= 0, a known action), a known reclaim rule
    that has something to take back and a stack that configures it, and an http(s) Prometheus URL."""
    out = []
    controller = config.controller
    for key, minutes in (("stalledAfterMinutes", controller.stalled_after_minutes),
                         ("stalledLogAfterMinutes", controller.stalled_log_after_minutes)):
        if minutes < 0:
            out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.{key}", f"{minutes} is below 0",
                                     "give minutes, or 0 to turn it off"))
    if controller.node_loss_release_after_seconds < -1:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.nodeLossReleaseAfterSeconds",
                                 f"{controller.node_loss_release_after_seconds} is below -1",
                                 "give seconds, or -1 to never delete an evicted pod of a lost node"))
    if controller.stalled_action not in STALL_ACTIONS:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.stalledAction",
                                 f"{controller.stalled_action!r} is unknown", f"use one of {', '.join(STALL_ACTIONS)}"))
    if controller.reclaim not in RECLAIM_CHOICES:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.reclaim", f"{controller.reclaim!r} is unknown",
                                 f"use one of {', '.join(RECLAIM_CHOICES)}"))
    elif controller.reclaim != "none" and config.scheduler.queue_plugin != "capacity":
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.reclaim",
                                 f"reclaim takes back what elastic queues lend, but queuePlugin "
                                 f"{config.scheduler.queue_plugin!r} lends nothing",
                                 f"set {NAMESPACE}:scheduler.queuePlugin: capacity, or controller.reclaim: none"))
    elif controller.reclaim != "none" and config.controllers_run_locally:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.reclaim",
                                 "this stack's controller is the local cluster's process, which the stack does not "
                                 "configure", f"remove controller.reclaim and start the cluster with `trainyard "
                                 f"cluster up --reclaim {controller.reclaim}` (then `trainyard up`)"))
    url = config.controller.prometheus_url
    if url and not re.match(r"^https?://[^\s/]+", url):
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.prometheusUrl", f"{url!r} is not an http(s) URL",
                                 "write it as http://prometheus.monitoring.svc:9090"))
    return out


def check_controller(config: StackConfig) -> list[ConfigProblem]:
    out, ctl, base = [], config.controller, f"{NAMESPACE}:controller"
    if ctl.replicas < 1:
        out.append(ConfigProblem(config.file, f"{base}.replicas", f"{ctl.replicas} replicas", "run at least 1 replica"))
    if config.policies.require_image_digest and "@sha256:" not in ctl.image:
        out.append(ConfigProblem(config.file, f"{base}.image", f"{ctl.image!r} is not pinned by digest",
                                 "use image@sha256:<digest> (policies.requireImageDigest is on)"))
    if ctl.webhook.url and not ctl.webhook.url.startswith("https://"):
        out.append(ConfigProblem(config.file, f"{base}.webhook.url", "admission webhooks must use https",
                                 "use https://host:port"))
    try:
        parse_feature_gates(ctl.feature_gates)
    except ValueError as err:
        out.append(ConfigProblem(config.file, f"{base}.featureGates", str(err), "e.g. TrainJobStatus=true"))
    if ctl.webhook.failure_policy not in ("Fail", "Ignore"):
        out.append(ConfigProblem(config.file, f"{base}.webhook.failurePolicy", f"{ctl.webhook.failure_policy!r}",
                                 "use Fail or Ignore"))
    out += check_webhook_certificate(config)
    if ctl.metrics.auth and not ctl.metrics.secure_serving:
        out.append(ConfigProblem(config.file, f"{base}.metrics.auth", "auth needs secureServing: a scraper's bearer "
                                 "token must not cross the network in clear", "set controller.metrics.secureServing: true"))
    if not config.controllers_run_locally and not (config.kubeconfig or config.kube_context):
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:kubeContext", "no kubeconfig or context for this stack",
                                 "set trainyard:kubeconfig and/or trainyard:kubeContext (no ambient kubeconfig is used)"))
    if config.controllers_run_locally and config.kube_context and not config.kube_context.startswith(LOCAL_CONTEXTS):
        out.append(ConfigProblem(
            config.file, f"{NAMESPACE}:controllersRunLocally",
            f"true runs the controllers as processes of a local cluster and keeps the state in a local file backend, "
            f"but this stack targets context {config.kube_context!r}, which is not a local cluster's",
            "remove controllersRunLocally (shared environments run the controllers in-cluster and keep their state "
            "in your Pulumi backend)"))
    return out


LOCAL_CONTEXTS = ("kwok-", "kind-")
"""Context prefixes of the local clusters `trainyard cluster up` makes (kwokctl, kind): the only targets of a
stack whose controllers run locally."""


def check_webhook_certificate(config: StackConfig) -> list[ConfigProblem]:
    """An in-cluster webhook needs a serving certificate the stack names explicitly (nothing is assumed)."""
    hook, path = config.controller.webhook, f"{NAMESPACE}:controller.webhook"
    choices = "; ".join(f"`{name}`: {meaning}" for name, meaning in WEBHOOK_CERTIFICATE_SOURCES.items())
    if hook.url:  # URL mode (local processes): the caller's own certificate, no Secret involved
        for key, value in (("certificate", hook.certificate), ("clientCaFile", hook.client_ca_file)):
            if value:
                return [ConfigProblem(config.file, f"{path}.{key}", "is only used when the webhook is reached "
                                      "through the controller's Service (the local cluster's controller is given the "
                                      "API server's client CA by `trainyard cluster up`)",
                                      "remove it, or remove webhook.url")]
        return []
    if config.controllers_run_locally:
        return []
    if hook.certificate is None:
        return [ConfigProblem(config.file, f"{path}.certificate",
                              "the in-cluster webhook needs a serving certificate and the stack does not say where "
                              "it comes from", f"set it to one of: {choices}")]
    if hook.certificate not in WEBHOOK_CERTIFICATE_SOURCES:
        return [ConfigProblem(config.file, f"{path}.certificate", f"{hook.certificate!r} is not a certificate source",
                              f"use one of: {choices}")]
    if hook.certificate == "provided" and not hook.ca_bundle_file:
        return [ConfigProblem(config.file, f"{path}.caBundleFile", "`certificate: provided` needs the CA bundle "
                              "that signed Secret trainyard-webhook-cert", "set caBundleFile to that CA's PEM file")]
    if hook.certificate == "cert-manager" and hook.ca_bundle_file:
        return [ConfigProblem(config.file, f"{path}.caBundleFile", "cert-manager injects the CA bundle",
                              "remove caBundleFile, or use `certificate: provided`")]
    if not hook.client_ca_file:
        return [ConfigProblem(config.file, f"{path}.clientCaFile", "the webhook answers any client that reaches its "
                              "Service, and its answers say whether a runtime or JobSet of a name exists in any "
                              "namespace", "give the API server a client certificate for admission webhooks (its "
                              "AdmissionConfiguration kubeConfigFile) and set clientCaFile to the CA that signed it",
                              severity=WARNING)]
    return []
