"""Keep the local vc-scheduler's conf file equal to the ConfigMap deployed in the cluster.

In a real cluster the kubelet projects `volcano-scheduler-configmap` into the scheduler pod
and vc-scheduler hot-reloads it. The local vc-scheduler is a host process, so this small
loop plays the kubelet's part: whatever `pulumi up` deploys is what schedules.

Run as: python -m trainyard.cluster.scheduler_conf_sync --kubeconfig K --file F
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from trainyard.cluster.spec import SCHEDULER_CONF_KEY, SCHEDULER_CONFIGMAP, VOLCANO_NAMESPACE


def write_if_changed(path: Path, text: str) -> bool:
    """Atomic replace (rename fires the Create event vc-scheduler's directory watch reloads on)."""
    if path.exists() and path.read_text() == text:
        return False
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".conf-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--namespace", default=VOLCANO_NAMESPACE)
    parser.add_argument("--name", default=SCHEDULER_CONFIGMAP)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    config.load_kube_config(config_file=args.kubeconfig)
    core = client.CoreV1Api()
    stop = False

    def _stop(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stop:
        try:
            cm = core.read_namespaced_config_map(args.name, args.namespace)
            text = (cm.data or {}).get(SCHEDULER_CONF_KEY)
            if text and write_if_changed(args.file, text):
                print(f"{time.strftime('%H:%M:%S')} applied {args.namespace}/{args.name} "
                      f"resourceVersion {cm.metadata.resource_version}", flush=True)
        except ApiException as exc:
            if exc.status != 404:
                print(f"reading {args.namespace}/{args.name}: {exc.status} {exc.reason}", file=sys.stderr, flush=True)
        except Exception as exc:  # API server restarting: keep the last good file and retry
            print(f"reading {args.namespace}/{args.name}: {exc}", file=sys.stderr, flush=True)
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
