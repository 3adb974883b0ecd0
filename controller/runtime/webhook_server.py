"""HTTPS server for the admission webhooks (TrainJob, TrainingRuntime, ClusterTrainingRuntime).

Rules that CEL in the CRD cannot express (runtime lookup, Volcano queue and PriorityClass
existence, runtimePatches vs. the JobSet's state, deprecation warnings) are answered here by
the pure `admission.admission_review_response`; this module only does TLS, HTTP and lookups.

Registration (pure, `controller/webhook_configuration.py`): a ValidatingWebhookConfiguration with rules
for trainer.kubeflow.org trainjobs/trainingruntimes/clustertrainingruntimes (CREATE, UPDATE) pointing at
- in a real cluster: the controller's Service (`clientConfig.service`, caBundle of the serving cert);
- on the local cluster: `clientConfig.url: https://127.0.0.1:<port><path>` (the API server runs
  on the host and Services have no endpoints there).
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainyard.toolchain.flux_templates import read_flux_templates

from ..admission import admission_review_response
from ..webhook_configuration import VALIDATE_PATH
from .apiserver import RESOURCES, ApiView
from .https_server import serve_https
from .transport import ApiError

log = logging.getLogger("trainyard.controller.webhook")


def make_lookup(api: ApiView):
    def lookup(kind: str, name: str | None, namespace: str | None = None):
        resource = RESOURCES.get(kind)
        if resource is None:
            return None
        if name is None:  # a list: the namespace's ResourceQuotas
            try:
                items = api.list(resource, namespace).get("items") or []
            except ApiError as exc:
                if exc.status != 403:
                    raise
                return []  # not allowed to list them: the reconcile's preflight still reports the quota
            return [{**item, "kind": kind, "apiVersion": resource.api_version} for item in items]
        try:
            obj = api.get(resource, name, namespace if resource.namespaced else None)
        except ApiError as exc:
            if kind != "Namespace" or exc.status != 403:
                raise
            # deployed without the right to read namespaces: no tenant checks (the queue guard still holds)
            log.warning(json.dumps({"msg": "cannot read namespace: tenant admission checks skipped", "namespace": name}))
            return None
        if obj is not None:
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", resource.api_version)
        return obj

    return lookup


def make_dry_run_pod(api):
    """`admission.DryRunPod` on the controller's own identity. A refusal of the controller itself (deployed without
    pods create, an API server error) is no verdict on the TrainJob: logged once, and the pods go unchecked (the
    reconciler still notices a refusal at run time)."""
    warned = []

    def dry_run_pod(pod: dict) -> str | None:
        try:
            return api.dry_run_create(pod)
        except ApiError as exc:
            if not warned:
                warned.append(True)
                log.warning(json.dumps({"msg": "cannot dry-run pods: admission does not foresee pod refusals",
                                        "status": exc.status, "error": str(exc)[:300]}))
            return None

    return dry_run_pod


def own_identity(api) -> frozenset[str]:
    """The controller's user name (the one identity that may write the platform's annotations on TrainJobs); empty,
    so nothing is refused for it, when the API server cannot say."""
    try:
        name = api.whoami()
    except Exception as exc:  # an API server without SelfSubjectReview, a network error at start
        log.warning(json.dumps({"msg": "own identity unknown: the platform's TrainJob annotations are not guarded",
                                "error": str(exc)[:300]}))
        return frozenset()
    return frozenset([name]) if name else frozenset()


def serve_webhooks(api: ApiView, address: str, cert_dir: str, client_ca: str | None = None) -> ThreadingHTTPServer:
    """`client_ca`: answer only the API server, whose webhook client certificate that CA signed (its
    AdmissionConfiguration's kubeConfigFile); without one any client reaching the port gets answers, and the
    answers tell whether a runtime or JobSet of a name exists in any namespace."""
    lookup = make_lookup(api)
    dry_run_pod = make_dry_run_pod(api)
    platform_users = own_identity(api)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            if not self.path.startswith(VALIDATE_PATH):
                self.send_response(404)
                self.end_headers()
                return
            length = int(self.headers.get("Content-Length", "0"))
            try:
                review = json.loads(self.rfile.read(length))
                answer = admission_review_response(review, lookup, dry_run_pod, platform_users,
                                                   flux_templates=read_flux_templates)
            except Exception as exc:  # never crash the server on one bad review
                log.warning(json.dumps({"msg": "admission review failed", "error": str(exc)[:300]}))
                uid = ((locals().get("review") or {}).get("request") or {}).get("uid", "")
                answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "response": {"uid": uid, "allowed": False,
                                       "status": {"code": 500, "message": f"trainyard webhook error: {exc}"}}}
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = serve_https(Handler, address, cert_dir, "webhooks", client_ca)
    log.info(json.dumps({"msg": "serving admission webhooks", "address": address}))
    return server
