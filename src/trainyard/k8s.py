"""Kubernetes names and helpers every trainyard package shares (controller, runtimes, queues, platform,
the CLI and the benchmarks): API groups and versions, well-known labels and annotations, resource
quantities, and read access to a JobSet's replicated jobs.

Pure and dependency-free, so any package (the controller process included, which must stay small)
imports it without a cycle. Tests keep literal strings where they state what the API must show.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

from trainyard.errors import InputError

# ---- API groups and versions ---------------------------------------------------------------------

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
"""The storage version; every served version has the same schema."""
TRAINER_SERVED_VERSIONS = ("v1alpha1", "v2alpha1")
TRAINER_API_VERSION = f"{TRAINER_GROUP}/{TRAINER_VERSION}"

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"

VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSION = "v1beta1"
VOLCANO_API_VERSION = f"{VOLCANO_GROUP}/{VOLCANO_VERSION}"
VOLCANO_TOPOLOGY_GROUP = "topology.volcano.sh"
VOLCANO_BATCH_GROUP = "batch.volcano.sh"
VOLCANO_BUS_API_VERSION = "bus.volcano.sh/v1alpha1"
"""Commands to Volcano's controllers (OpenQueue, CloseQueue), as `vcctl queue operate` sends them."""

COSCHEDULING_GROUP = "scheduling.x-k8s.io"
COSCHEDULING_VERSION = "v1alpha1"
COSCHEDULING_API_VERSION = f"{COSCHEDULING_GROUP}/{COSCHEDULING_VERSION}"

SCHEDULING_GROUP = "scheduling.k8s.io"
"""PriorityClasses (core Kubernetes)."""

TRAINJOBS, TRAININGRUNTIMES, CLUSTERTRAININGRUNTIMES = "trainjobs", "trainingruntimes", "clustertrainingruntimes"
JOBSETS, PODGROUPS, QUEUES = "jobsets", "podgroups", "queues"


def resource_name(plural: str, group: str) -> str:
    """`<plural>.<group>`: a CRD's name, what `kubectl get` and NotFound messages say."""
    return f"{plural}.{group}"


def config_api_version(group: str, version: str = "v1alpha1") -> str:
    """The apiVersion of a controller's own configuration file (`config.<group>/<version>`)."""
    return f"config.{group}/{version}"


def pulumi_type(api_version: str, kind: str) -> str:
    """The Pulumi Kubernetes provider's type token of a kind (`kubernetes:<group>/<version>:<Kind>`)."""
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


# ---- well-known labels and annotations -----------------------------------------------------------

# Upstream Kubeflow Trainer.
LABEL_FRAMEWORK = f"{TRAINER_GROUP}/framework"
LABEL_ANCESTOR = f"{TRAINER_GROUP}/trainjob-ancestor-step"
LABEL_SUPPORT = f"{TRAINER_GROUP}/support"
SUPPORT_DEPRECATED = "deprecated"
LABEL_WEBHOOK_VALIDATION = f"{TRAINER_GROUP}/webhook-validation"
MANAGED_BY_CONTROLLER = f"{TRAINER_GROUP}/trainjob-controller"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"

# Schedulers and batch.
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = f"{VOLCANO_GROUP}/queue-name"
VOLCANO_SCHEDULER_NAME = "volcano"
COSCHEDULING_POD_GROUP_LABEL = f"{COSCHEDULING_GROUP}/pod-group"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
GPU_RESOURCE = "nvidia.com/gpu"
DRA_GPU_DEVICE_CLASSES = ("gpu.nvidia.com",)
"""DeviceClasses whose devices are GPUs, by default (NVIDIA's DRA driver); a stack's `policies.gpuDeviceClasses`."""
DRA_DEVICES_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
"""ResourceQuota key `<device class>.deviceclass.resource.k8s.io/devices`: the devices of that class a namespace's
ResourceClaims may request."""
PART_OF_LABEL = "app.kubernetes.io/part-of"
CONTROLLER_NAME = "trainyard-controller"  # the in-cluster controller's Deployment and ServiceAccount


def part_of_trainyard() -> dict[str, str]:
    """The label every object trainyard installs carries (a new dict each call; callers add to it)."""
    return {PART_OF_LABEL: "trainyard"}


# trainyard's platform layer.
TRAINYARD_DOMAIN = "trainyard.dev"
TENANT_LABEL = f"{TRAINYARD_DOMAIN}/tenant"
NAMESPACE_QUEUE_LABEL = f"{TRAINYARD_DOMAIN}/queue"
NAMESPACE_PRIORITY_CLASSES_ANNOTATION = f"{TRAINYARD_DOMAIN}/priority-classes"  # comma-separated
NAMESPACE_DEFAULT_PRIORITY_CLASS_ANNOTATION = f"{TRAINYARD_DOMAIN}/default-priority-class"
# ServiceAccounts a tenant's TrainJob pods may run as besides `default` (comma-separated; the stack's serviceAccounts)
NAMESPACE_SERVICE_ACCOUNTS_ANNOTATION = f"{TRAINYARD_DOMAIN}/service-accounts"
# The longest terminationGracePeriodSeconds a tenant's TrainJob pods may ask (the stack's limits)
NAMESPACE_MAX_GRACE_ANNOTATION = f"{TRAINYARD_DOMAIN}/max-termination-grace-seconds"
NAMESPACE_DEFAULT_MEMORY_LIMIT_ANNOTATION = f"{TRAINYARD_DOMAIN}/default-memory-limit"
NAMESPACE_DEFAULT_EPHEMERAL_LIMIT_ANNOTATION = f"{TRAINYARD_DOMAIN}/default-ephemeral-storage-limit"
NAMESPACE_DEFAULT_EMPTYDIR_SIZE_ANNOTATION = f"{TRAINYARD_DOMAIN}/default-emptydir-size-limit"
NAMESPACE_BUDGET_ANNOTATION = f"{TRAINYARD_DOMAIN}/budget"
"""A tenant's GPU-hour budget as the platform renders it (JSON: gpuHours, period, action, demoteTo)."""
NAMESPACE_BUDGET_STATUS_ANNOTATION = f"{TRAINYARD_DOMAIN}/budget-status"
"""What the controller last found of the budget (JSON: period, gpuHours spent, state, since, action applied)."""
NAMESPACE_STALLED_ANNOTATION = f"{TRAINYARD_DOMAIN}/stalled-trainjobs"
"""The namespace's TrainJobs the controller's stall loop finds stalled now (JSON list, `tenant_policy`)."""
PRIORITY_CLASS_LABEL = f"{TRAINYARD_DOMAIN}/priority-class"
# On a TrainJob the controller failed because it can never start (value: the reason, e.g. PodsRefused): `report`
# lists them by this label, and believes it only with the status condition (tenants can write labels, not status)
NEVER_STARTS_LABEL = f"{TRAINYARD_DOMAIN}/never-starts"
RESERVATION_TAINT = f"{TRAINYARD_DOMAIN}/reserved-for"  # NoSchedule on nodes held for a waiting gang; value = the gang
RECLAIMED_FOR_ANNOTATION = f"{TRAINYARD_DOMAIN}/reclaimed-for"  # on a TrainJob suspended to make room: "<ns>/<gang> <epoch s>"
CHECKPOINT_REQUESTED_ANNOTATION = f"{TRAINYARD_DOMAIN}/checkpoint-requested"
"""On a running TrainJob reclaim asked to save a checkpoint before it is suspended: "<ns>/<gang> <epoch s>"."""
CHECKPOINT_STEP_METRIC = f"{TRAINYARD_DOMAIN}/checkpoint-step"
CHECKPOINT_TIME_METRIC = f"{TRAINYARD_DOMAIN}/checkpoint-time"
"""trainerStatus metrics a training process reports when it saved a checkpoint (the step, and when: RFC 3339)."""
NAMESPACE_CHECKPOINT_GRACE_ANNOTATION = f"{TRAINYARD_DOMAIN}/checkpoint-grace-seconds"
NAMESPACE_NODE_LOSS_TOLERATION_ANNOTATION = f"{TRAINYARD_DOMAIN}/node-loss-toleration-seconds"
"""How long reclaim waits for a tenant's TrainJob it asked to save a checkpoint (the stack's limits)."""
CATALOG_VERSION_LABEL = f"{TRAINYARD_DOMAIN}/catalog-version"
CATALOG_RUNTIME_LABEL = f"{TRAINYARD_DOMAIN}/catalog-runtime"
MPI_IMPLEMENTATION_LABEL = f"{TRAINYARD_DOMAIN}/mpi-implementation"
CRD_UNPROTECTED_LABEL = f"{TRAINYARD_DOMAIN}/crd-unprotected"
RACK_LABEL = f"{TRAINYARD_DOMAIN}/rack"
SPINE_LABEL = f"{TRAINYARD_DOMAIN}/spine"
TRACE_JOB_LABEL = f"{TRAINYARD_DOMAIN}/trace-job"  # bench/scheduling_trace.py: the trace job a pod belongs to
EXPECTED_START_ANNOTATION = f"{TRAINYARD_DOMAIN}/expected-start-epoch"  # a start estimate Event's expected start
ESTIMATED_AT_ANNOTATION = f"{TRAINYARD_DOMAIN}/estimated-at-epoch"  # ... and when it was estimated (epoch seconds)
TRACE_TENANT_LABEL = f"{TRAINYARD_DOMAIN}/trace-tenant"

# kwok (simulated nodes): how long a simulated pod runs before its pod-complete Stage finishes it.
KWOK_STAGE_GROUP = "kwok.x-k8s.io"
KWOK_POD_COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
KWOK_NODE_LABEL = ("kwok.x-k8s.io/node", "fake")
"""(key, value) of the label kwok selects the nodes it keeps alive by (heartbeats, pods): simulated nodes carry
it, real kubelets' nodes do not, and a simulated node that loses it dies (`trainyard cluster node-down`). A label,
not an annotation: the API server's watch tells kwok when a node stops matching a label selector, while kwok
filters annotations itself and would go on renewing the node's lease."""


# ---- resource quantities (exact fractions) -------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
"""The CRD's (and apimachinery's) quantity grammar: what the API server accepts, nothing more."""
_GRAMMAR = re.compile(QUANTITY_PATTERN)
MAX_EXPONENT = 36
"""Beyond any real resource; bounds the exact arithmetic ('1e999999999' would take forever)."""
_HINT = "use a number or a string such as '4', '500m', '16Gi' (binary) or '16G' (decimal)"


def resource_version(obj: dict | None) -> str | None:
    """metadata.resourceVersion, or None for an object (or answer) that has none."""
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def parse_quantity(value: object, field: str = "quantity") -> Fraction:
    """Parse '500m', '16Gi', 2, '1e3' into an exact number as the API server does; raise InputError naming
    `field` otherwise. The grammar check comes first: it refuses what a bare Decimal would accept
    ('1K', '1_000', 'NaN', ' 2 ')."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"invalid quantity {value!r}; {_HINT}", field)
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    amount, problem = _amount_of(text)
    if amount is None:
        raise InputError(f"invalid quantity {value!r}{problem}; {_HINT}", field)
    return amount


@lru_cache(maxsize=4096)
def _amount_of(text: str) -> tuple[Fraction | None, str]:
    """(the exact amount, "") or (None, why not). Cached: a report parses the same few quantities ('8', '16Gi')
    tens of thousands of times at 10,000 PodGroups, and a Fraction is immutable."""
    if not _GRAMMAR.match(text):
        return None, ": not in the Kubernetes quantity grammar (the API server refuses it)"
    try:
        amount = _decimal_quantity(text)
    except ArithmeticError:  # decimal.InvalidOperation ('1e1.5': a fractional exponent) and overflow
        amount = None
    if amount is None or not amount.is_finite() or abs(amount.adjusted()) > MAX_EXPONENT:
        return None, f": out of range (at most 10^{MAX_EXPONENT})"
    return Fraction(amount), ""


def _decimal_quantity(text: str) -> Decimal:
    """The amount of a grammatical quantity: its number times its suffix's factor (1Ki = 1024, 1k = 1000,
    1e3 = 1000; 'E' alone is exa, 'E' followed by digits an exponent)."""
    with localcontext(prec=200):  # exact for any mantissa a manifest holds (the default context rounds at 28)
        if text[-2:] in _BINARY:
            return Decimal(text[:-2]) * _BINARY[text[-2:]]
        if text[-1] in _DECIMAL_EXPONENT:
            return Decimal(text[:-1]).scaleb(_DECIMAL_EXPONENT[text[-1]])
        return Decimal(text)


def quantity_or_none(value: object) -> Fraction | None:
    """An exact amount, or None when the value is not a Kubernetes quantity."""
    if isinstance(value, Fraction):
        return value
    try:
        return parse_quantity(value)
    except InputError:
        return None


def is_binary(value: object) -> bool:
    return isinstance(value, str) and value.strip()[-2:] in _BINARY


def format_quantity(amount: Fraction, binary: bool = False) -> str:
    """Canonical text: the largest suffix that keeps an integer mantissa (as apimachinery prints)."""
    if binary and amount.denominator == 1 and amount >= 1024:
        for suffix, factor in reversed(_BINARY.items()):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        return str(amount.numerator)
    if amount == 0:
        return "0"
    # Kubernetes rounds sub-nano precision up.
    amount = Fraction(math.ceil(amount * 10**9), 10**9)
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        scaled = amount / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(amount / _DECIMAL['n'])}n"


def ceil_value(value: object, field: str = "quantity") -> int:
    """apimachinery `Quantity.Value()`: the quantity rounded up to an integer."""
    return math.ceil(parse_quantity(value, field))


# ---- replicated jobs (reading; a wrongly typed level reads as empty, schema checks report it) ------

REPLICATED_JOBS_PATH = "spec.template.spec.replicatedJobs"
"""Where a runtime (and a JobSet template) lists its replicated jobs."""


def json_copy(value):
    """A deep copy of JSON-shaped data (dicts, lists, scalars), as `copy.deepcopy` makes it but about three times
    faster: no memo, no dispatch on type. Other leaves are shared, so they must be immutable (what YAML and
    JSON decoding produce: str, int, float, bool, None, datetime)."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


def mapping(value: object) -> dict:
    """Reading through user documents: a wrongly typed level reads as empty."""
    return value if isinstance(value, dict) else {}


def jobset_jobs(jobset_spec: object) -> list[dict]:
    """The replicated jobs of a JobSet spec (`spec.replicatedJobs`), objects only."""
    jobs = mapping(jobset_spec).get("replicatedJobs")
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def runtime_jobs(runtime: object) -> list[dict]:
    """The replicated jobs of a (Cluster)TrainingRuntime (`spec.template.spec.replicatedJobs`)."""
    return jobset_jobs(mapping(mapping(mapping(runtime).get("spec")).get("template")).get("spec"))


def find_job(jobset_spec: object, name: str) -> dict | None:
    """The replicated job called `name` of a JobSet spec, or None."""
    return next((j for j in jobset_jobs(jobset_spec) if j.get("name") == name), None)


def job_labels(job: dict) -> dict:
    return mapping(mapping(mapping(job.get("template")).get("metadata")).get("labels"))


def ancestor_of(job: dict) -> str | None:
    return job_labels(job).get(LABEL_ANCESTOR)


def job_pod_spec(job: dict) -> dict:
    """`template.spec.template.spec` of a replicated job (the pod spec), {} where a level is missing."""
    return mapping(mapping(mapping(mapping(job.get("template")).get("spec")).get("template")).get("spec"))


def job_containers(job: dict, init: bool = False) -> list[dict]:
    """The (init) containers of a job's pod template, for reading (nothing is created)."""
    listed = job_pod_spec(job).get("initContainers" if init else "containers")
    return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []


def pod_spec_holds_gpus(pod_spec: dict) -> bool:
    """Whether a pod asks for GPUs in a container or a native sidecar (an init container that keeps running)."""
    containers = list(pod_spec.get("containers") or []) + [
        c for c in pod_spec.get("initContainers") or [] if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    return any(GPU_RESOURCE in mapping(mapping(c.get("resources")).get(kind))
               for c in containers if isinstance(c, dict) for kind in ("limits", "requests"))
