"""The runtime snapshot's seal: the snapshot ConfigMap lives in the tenant's namespace, where a tenant admin
can edit it (or create it, with the right owner, before the controller does); the controller must never build
from a runtime it did not copy itself.

The controller keeps a random key in a Secret of its own namespace (`SEAL_SECRET`, out of tenants' reach)
and writes on every snapshot it creates the annotation `trainyard.dev/runtime-snapshot-seal`: an HMAC-SHA256
of the TrainJob's identity (namespace, name, uid) and the stored runtime text. Before every build from a
snapshot the seal is checked; a missing or wrong seal is a build failure (condition and one event, nothing
applied). The pure builders (render, fit, validate) pass no key and neither seal nor check.
"""

from __future__ import annotations

import hashlib
import hmac

from trainyard import k8s as K
from . import constants as C
from . import k8s
from .errors import BuildError

SEAL_ANNOTATION = f"{K.TRAINYARD_DOMAIN}/runtime-snapshot-seal"
SEAL_SECRET = "trainyard-runtime-snapshot-seal"
SEAL_SECRET_KEY = "key"


class SnapshotTamperedError(BuildError):
    """The snapshot was written by someone other than the controller."""


def seal(key: bytes, trainjob: dict, runtime_text: str) -> str:
    meta = trainjob.get("metadata") or {}
    identity = f"{meta.get('namespace', '')}/{meta.get('name', '')}/{meta.get('uid', '')}\n"
    return hmac.new(key, (identity + runtime_text).encode(), hashlib.sha256).hexdigest()


def _runtime_text(snapshot: dict) -> str:
    text = (snapshot.get("data") or {}).get(C.SNAPSHOT_KEY)
    return text if isinstance(text, str) else ""


def sealed(snapshot: dict, key: bytes, trainjob: dict) -> dict:
    meta = dict(snapshot["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), SEAL_ANNOTATION: seal(key, trainjob, _runtime_text(snapshot))}
    return {**snapshot, "metadata": meta}


def check_seal(snapshot: dict, key: bytes, trainjob: dict) -> None:
    found = ((snapshot.get("metadata") or {}).get("annotations") or {}).get(SEAL_ANNOTATION, "")
    if not hmac.compare_digest(str(found), seal(key, trainjob, _runtime_text(snapshot))):
        raise SnapshotTamperedError(
            f"the runtime snapshot ConfigMap {k8s.name_of(snapshot)} was not written by the TrainJob controller "
            f"(its {SEAL_ANNOTATION} does not match its content): nothing is applied from it; delete the TrainJob "
            "and create it again to snapshot the runtime afresh", "spec.runtimeRef")
