"""Devices per node through Dynamic Resource Allocation: `spec.trainer.resourceClaimsPerNode` (Kubeflow Trainer
KEP-2782, kubeflow/trainer#4027) (pure).

Each entry names a ResourceClaimTemplate of the TrainJob's namespace. The trainer's pods get one claim per entry
(`spec.resourceClaims`), their `node` container uses it (`resources.claims`), and the API server's resource-claim
controller makes one ResourceClaim per pod from the template. Where the GPUs per node matter (`numProcPerNode:
auto`, the MPI slots, fit and quotas) and `resourcesPerNode` names none, they are the templates' GPU devices: the
sum of the `exactly.count` of every request whose device class name contains `gpu` (as upstream finds GPU
resources by name), `firstAvailable` counting its largest alternative. A GPU request for `All` devices has no
count: it is refused, so no quota or fit figure is ever a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainyard import k8s as K
from . import constants as C
from . import k8s
from .errors import BuildError, ValidationError
from .schema import FieldError

FIELD = "spec.trainer.resourceClaimsPerNode"
TEMPLATE_KIND = "ResourceClaimTemplate"
TEMPLATE_API_VERSION = "resource.k8s.io/v1"


def claims_of(trainjob: Mapping) -> list[dict]:
    trainer = K.mapping(K.mapping(trainjob.get("spec")).get("trainer"))
    return [c for c in trainer.get("resourceClaimsPerNode") or [] if isinstance(c, dict)]


def template_refs(trainjob: Mapping) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of the ResourceClaimTemplates the TrainJob names, once each."""
    namespace = k8s.namespace_of(dict(trainjob))
    names = dict.fromkeys(str(c.get("resourceClaimTemplateName")) for c in claims_of(trainjob))
    return [(TEMPLATE_KIND, name, namespace) for name in names]


def _is_gpu_class(name: object) -> bool:
    return "gpu" in str(name or "").lower()


def _request_counts(request: Mapping) -> list[tuple[str, int | None]]:
    """(device class, count) of one device request; None for `All` (no count until allocated)."""
    alternatives = [K.mapping(request.get("exactly"))] if request.get("exactly") else \
        [K.mapping(r) for r in request.get("firstAvailable") or []]
    out = []
    for alternative in alternatives:
        mode = alternative.get("allocationMode") or "ExactCount"
        out.append((str(alternative.get("deviceClassName") or ""),
                    None if mode == "All" else int(alternative.get("count") or 1)))
    return out


def template_devices(template: Mapping) -> dict[str, int | None]:
    """Device class -> devices one claim from `template` requests (None: `All`); a `firstAvailable` request
    counts its largest alternative of each class."""
    devices = K.mapping(K.mapping(K.mapping(template.get("spec")).get("spec")).get("devices"))
    out: dict[str, int | None] = {}
    for request in devices.get("requests") or []:
        largest: dict[str, int | None] = {}
        for device_class, count in _request_counts(K.mapping(request)):
            before = largest.get(device_class, 0)
            largest[device_class] = None if count is None or before is None else max(before, count)
        for device_class, count in largest.items():
            before = out.get(device_class, 0)
            out[device_class] = None if count is None or before is None else before + count
    return out


def gpu_devices(template: Mapping) -> int | None:
    """GPUs one claim from `template` requests; None when a GPU request asks for `All`."""
    counts = [count for device_class, count in template_devices(template).items() if _is_gpu_class(device_class)]
    return None if None in counts else sum(c for c in counts if c is not None)


def find_template(objects: Iterable[dict], name: str, namespace: str) -> dict | None:
    return k8s.find_object(objects, TEMPLATE_KIND, name, namespace)


def gpus_per_node(trainjob: Mapping, objects: Iterable[dict]) -> int:
    """The GPUs the TrainJob's claims give each node, its templates found among `objects`. Raises BuildError
    naming the entry when a template is missing or asks for `All` GPUs."""
    objects = list(objects)
    namespace = k8s.namespace_of(dict(trainjob))
    total = 0
    for index, claim in enumerate(claims_of(trainjob)):
        name = str(claim.get("resourceClaimTemplateName"))
        template = find_template(objects, name, namespace)
        field = f"{FIELD}[{index}].resourceClaimTemplateName"
        if template is None:
            raise BuildError(f"ResourceClaimTemplate {name!r} not found in namespace {namespace}; create it "
                             "(resource.k8s.io/v1) before the TrainJob, or name one that exists", field)
        gpus = gpu_devices(template)
        if gpus is None:
            raise BuildError(f"ResourceClaimTemplate {name!r} asks for All devices of a GPU class, a count no quota "
                             "or fit can check; give the request allocationMode ExactCount and a count", field)
        total += gpus
    return total


def apply_claims(spec: dict, trainjob: Mapping) -> None:
    """The claims onto the trainer job's pod template (`spec.resourceClaims`) and its `node` container
    (`resources.claims`); a claim name the runtime's pod already uses is refused."""
    claims = claims_of(trainjob)
    if not claims:
        return
    job = k8s.job_to_edit_by_ancestor(spec, C.ANCESTOR_TRAINER)
    if job is None:
        raise ValidationError("the runtime has no replicated job labelled trainer to give the claims to; use a "
                              "runtime with a trainer node, or request devices in its pod template", FIELD)
    pod = k8s.pod_template(job).setdefault("spec", {})
    taken = {str(c.get("name")) for c in pod.get("resourceClaims") or [] if isinstance(c, dict)}
    for index, claim in enumerate(claims):
        if claim["name"] in taken:
            raise ValidationError(f"claim {claim['name']!r} is already a claim of the runtime's pod template; give "
                                  "this entry another name", f"{FIELD}[{index}].name")
    pod.setdefault("resourceClaims", []).extend(
        {"name": c["name"], "resourceClaimTemplateName": c["resourceClaimTemplateName"]} for c in claims)
    container = k8s.find_container(job, C.NODE)
    if container is not None:
        resources = container.setdefault("resources", {})
        resources.setdefault("claims", []).extend({"name": c["name"]} for c in claims)


def pod_devices(pod_spec: Mapping, objects: Iterable[dict], namespace: str) -> dict[str, int]:
    """Quota keys `<class>.deviceclass.resource.k8s.io/devices` -> devices one pod's template claims request
    (templates among `objects`; a missing template or an `All` request counts nothing here: the build refuses
    them)."""
    objects = list(objects)
    out: dict[str, int] = {}
    for claim in pod_spec.get("resourceClaims") or []:
        name = K.mapping(claim).get("resourceClaimTemplateName")
        template = find_template(objects, str(name), namespace) if name else None
        for device_class, count in (template_devices(template) if template else {}).items():
            if count:
                key = f"{device_class}{K.DRA_DEVICES_QUOTA_SUFFIX}"
                out[key] = out.get(key, 0) + count
    return out


def admission_errors(trainjob: Mapping, cluster_objects: Iterable[dict], quotas: Iterable[dict] = ()) -> list[FieldError]:
    """What the webhook refuses at create: a claim whose template is missing or asks for `All` GPUs (its pods
    could never get their devices, or no quota could count them), and, in a namespace whose quota caps GPUs,
    GPUs of a device class no quota there caps (they would go around the tenant's GPU quota)."""
    cluster_objects = list(cluster_objects)
    try:
        gpus_per_node(trainjob, cluster_objects)
    except BuildError as err:
        return [FieldError(err.field or FIELD, "Invalid", err.message)]
    hard = {key for quota in quotas for key in K.mapping(K.mapping(quota.get("spec")).get("hard"))}
    if f"requests.{K.GPU_RESOURCE}" not in hard:
        return []
    namespace = k8s.namespace_of(dict(trainjob))
    errors = []
    for index, claim in enumerate(claims_of(trainjob)):
        template = find_template(cluster_objects, str(claim.get("resourceClaimTemplateName")), namespace) or {}
        for device_class, count in template_devices(template).items():
            if _is_gpu_class(device_class) and count and f"{device_class}{K.DRA_DEVICES_QUOTA_SUFFIX}" not in hard:
                errors.append(FieldError(
                    f"{FIELD}[{index}].resourceClaimTemplateName", "Forbidden",
                    f"its template claims GPUs of DeviceClass {device_class!r}, which no ResourceQuota of namespace "
                    f"{namespace} caps (its GPU quota covers {K.GPU_RESOURCE} and the classes in the stack's "
                    "policies.gpuDeviceClasses); use a listed class, or ask the platform team to list this one"))
    return errors
