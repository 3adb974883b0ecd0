"""The real nodes' NetworkPolicy enforcer (the I/O half of `realnodes.network_policy`): every second, read pods,
namespaces and NetworkPolicies, and when the rules they compile to change, replace the nftables table at once
(`nft -f`, one transaction). One process for the host: its real nodes share one network namespace and bridge.

Run as: python -m trainyard.realnodes.network_policy_enforcer --kubeconfig K --table T [--period S]
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import threading

from trainyard.capacity import live
from trainyard.controller.runtime.apiserver import ApiServer, Resource
from trainyard.realnodes import network_policy as NP

log = logging.getLogger("trainyard.network-policy")


def apply(text: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=text, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"nft refused the rules: {done.stderr.strip()}")


NETWORK_POLICIES = Resource("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies")


def read_cluster(api: ApiServer, table: str) -> str:
    """The ruleset for what the API server holds now."""
    pods = NP.pod_addresses(live.list_items(api, live.PODS))
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in live.list_items(api, live.NAMESPACES)}
    return NP.ruleset(*NP.ingress_rules(live.list_items(api, NETWORK_POLICIES), pods, namespaces), table=table)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--table", required=True, help="the nftables table (inet family) to keep")
    parser.add_argument("--period", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = live.connect(args.kubeconfig)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    applied = None
    while not stop.is_set():
        try:
            text = read_cluster(api, args.table)
            if text != applied:
                apply(text)
                applied = text
                log.info("rules applied (%d lines)", text.count("\n"))
        except Exception as exc:  # the API server restarting, a refused rule: say so, try again next round
            log.warning("network policies not applied: %s", exc)
        stop.wait(args.period)
    apply(NP.removal(args.table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
