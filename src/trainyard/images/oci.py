"""OCI image layouts: the registry-free form `ctr images import` reads.

The descriptor builders are pure; `write_layout` packs a root filesystem as one uncompressed layer (a
multi-GB torch layer would take minutes to gzip on two cores, and containerd unpacks it once per node).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LAYER_MEDIA = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA = "application/vnd.oci.image.index.v1+json"
REF_ANNOTATION = "io.containerd.image.name"
EPOCH = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class Blob:
    digest: str  # "sha256:<hex>"
    size: int

    def descriptor(self, media_type: str, **extra) -> dict:
        return {"mediaType": media_type, "digest": self.digest, "size": self.size, **extra}


def blob_of(data: bytes) -> Blob:
    return Blob("sha256:" + hashlib.sha256(data).hexdigest(), len(data))


def image_config(layer: Blob, env: dict[str, str], cmd: list[str], workdir: str = "/",
                 entrypoint: list[str] | None = None, user: str = "") -> dict:
    """The image configuration: one layer whose diff ID is its digest (it is not compressed). `user` ("uid:gid")
    is who the process runs as unless the pod says otherwise (numeric, so `runAsNonRoot` can check it)."""
    config: dict = {"Env": [f"{k}={v}" for k, v in env.items()], "Cmd": cmd, "WorkingDir": workdir}
    if entrypoint:
        config["Entrypoint"] = entrypoint
    if user:
        config["User"] = user
    return {"created": EPOCH, "architecture": "amd64", "os": "linux", "config": config,
            "rootfs": {"type": "layers", "diff_ids": [layer.digest]}}


def image_manifest(config: Blob, layer: Blob) -> dict:
    return {"schemaVersion": 2, "mediaType": MANIFEST_MEDIA, "config": config.descriptor(CONFIG_MEDIA),
            "layers": [layer.descriptor(LAYER_MEDIA)]}


def image_index(manifest: Blob, refs: list[str]) -> dict:
    """One entry per name, all for the same manifest (containerd's import creates each name)."""
    return {"schemaVersion": 2, "mediaType": INDEX_MEDIA,
            "manifests": [manifest.descriptor(MANIFEST_MEDIA, annotations={REF_ANNOTATION: ref}) for ref in refs]}


def _write_blob(layout: Path, data: bytes) -> Blob:
    blob = blob_of(data)
    (layout / "blobs" / "sha256" / blob.digest.split(":")[1]).write_bytes(data)
    return blob


def _pack_layer(rootfs: Path, layout: Path) -> Blob:
    """tar the root filesystem (sorted, numeric owners) straight into the layout, hashing as it streams."""
    partial = layout / "blobs" / "layer.partial"
    digest = hashlib.sha256()
    size = 0
    with subprocess.Popen(["tar", "--sort=name", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", "-", "."],
                          stdout=subprocess.PIPE) as tar, open(partial, "wb") as out:
        assert tar.stdout is not None
        while chunk := tar.stdout.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    if tar.returncode != 0:
        raise RuntimeError(f"tar of {rootfs} exited {tar.returncode}")
    blob = Blob("sha256:" + digest.hexdigest(), size)
    partial.rename(layout / "blobs" / "sha256" / digest.hexdigest())
    return blob


def write_layout(rootfs: Path, layout: Path, refs: list[str], env: dict[str, str], cmd: list[str],
                 entrypoint: list[str] | None = None, user: str = "") -> dict:
    """Write an OCI image layout of `rootfs` named `refs` (the first is its immutable name); returns
    {ref, aliases, digest, size} (digest: the manifest's)."""
    shutil.rmtree(layout, ignore_errors=True)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    layer = _pack_layer(rootfs, layout)
    config = _write_blob(layout, _canonical(image_config(layer, env, cmd, entrypoint=entrypoint, user=user)))
    manifest = _write_blob(layout, _canonical(image_manifest(config, layer)))
    (layout / "index.json").write_bytes(_canonical(image_index(manifest, refs)))
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    return {"ref": refs[0], "aliases": refs[1:], "digest": manifest.digest, "size": layer.size}


def _canonical(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
