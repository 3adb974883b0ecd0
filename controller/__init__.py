"""trainyard's Kubeflow Trainer v2 controller: the pure core here, its runtime in `runtime/`.

The core (this folder and `plugins/`) turns a TrainJob plus its runtime into plain dicts: no I/O, no API
server, no sockets. `runtime/` (informers, work queue, leader election, reconciler, HTTPS servers) reads and
applies them; it imports the core, never the reverse (tests/unit/test_layers.py).

Public API (plain dicts in, plain dicts out):
    build_objects(trainjob, runtime, existing=(), key_generator=None, status_server=None, plugins=REGISTRY) -> list[dict]
    may_apply_jobset(trainjob, existing_jobset) -> bool
    build_status(trainjob, jobset, now) -> dict ; requeue_after_seconds, deadline_exceeded
    validate_runtime(runtime, old=None) -> Result ; validate_trainjob(trainjob, runtime, old=None, cluster_objects=())
    admission_review_response(review, lookup) -> dict ; default_trainjob_patch(new, old, now)
    crd_objects() -> list[dict]
    strategic_merge(original, patch, merge_keys)
Errors: ControllerError > BuildError > (ValidationError, InputError).
Policies are plugins (`plugins/`, one ordered `plugins.REGISTRY`, protocol in `plugins/framework.py`).
"""

from .admission import Result, admission_review_response, default_trainjob_patch, validate_runtime, validate_trainjob
from .build import build_objects, may_apply_jobset
from .crds import crd_objects
from .errors import BuildError, ControllerError, InputError, ValidationError
from .smp import strategic_merge
from .status import build_status, deadline_exceeded, requeue_after_seconds

__all__ = [
    "Result", "admission_review_response", "default_trainjob_patch", "validate_runtime", "validate_trainjob",
    "build_objects", "may_apply_jobset", "crd_objects", "BuildError", "ControllerError", "InputError",
    "ValidationError", "strategic_merge", "build_status", "deadline_exceeded", "requeue_after_seconds",
]
