"""NetworkPolicy ingress rules as one nftables table for the real nodes' shared bridge (pure).

The real nodes' bridge CNI enforces no NetworkPolicy, and SIG Network's enforcer (`kube-network-policies`)
cannot run here: it hands packets to user space with nftables' `queue` statement, which this host's kernel lacks
(CONFIG_NFT_QUEUE unset). So the local cluster compiles the policies into plain nftables rules instead, for the
tests of the platform's policies to mean something. Scope, stated where it is used: ingress rules (pod, namespace
and ipBlock peers, numbered and named ports, port ranges) of pods with an address on the pod network; egress
rules are not enforced here (the platform renders none); a production cluster's CNI enforces both.

With the bridge's traffic passing netfilter (br_netfilter), a `forward` chain sees pod-to-pod packets on one node
and between nodes. Replies of allowed connections pass as `established`; packets the host sends (kubelet probes)
do not cross `forward`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable, Mapping

TABLE = "trainyard-netpol"
FAMILY = "inet"
ISOLATED = "isolated"


def _selector_matches(selector: Mapping | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions); an empty one matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@dataclass(frozen=True)
class PodAddress:
    namespace: str
    name: str
    ip: str
    labels: Mapping[str, str]
    ports: Mapping[tuple[str, str], int]
    """(port name, protocol) -> container port, for named ports in policies."""


def pod_addresses(pods: Iterable[dict]) -> list[PodAddress]:
    """Pods with an address of their own (not hostNetwork) that have not finished."""
    out = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        ip = status.get("podIP")
        if not ip or spec.get("hostNetwork") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            if ipaddress.ip_address(ip).version != 4:
                continue
        except ValueError:
            continue
        ports = {(p["name"], p.get("protocol") or "TCP"): int(p["containerPort"])
                 for c in spec.get("containers") or [] for p in c.get("ports") or [] if p.get("name")}
        out.append(PodAddress(meta.get("namespace", ""), meta.get("name", ""), ip, meta.get("labels") or {}, ports))
    return out


def _peer_sources(peer: Mapping, policy_namespace: str, pods: list[PodAddress],
                  namespace_labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """nft source expressions one `from` peer allows (each one match)."""
    if "ipBlock" in peer:
        block = peer["ipBlock"] or {}
        cidr = str(block.get("cidr", ""))
        if ":" in cidr:
            return []  # IPv6 blocks match no IPv4 pod
        excepts = [str(e) for e in block.get("except") or [] if ":" not in str(e)]
        return [f"ip saddr {cidr}" + (f" ip saddr != {{ {', '.join(excepts)} }}" if excepts else "")]
    pod_selector, namespace_selector = peer.get("podSelector"), peer.get("namespaceSelector")
    if namespace_selector is None:
        namespaces = {policy_namespace}
    else:
        namespaces = {ns for ns, labels in namespace_labels.items() if _selector_matches(namespace_selector, labels)}
    addresses = sorted({p.ip for p in pods if p.namespace in namespaces and _selector_matches(pod_selector, p.labels)})
    return [f"ip saddr {{ {', '.join(addresses)} }}"] if addresses else []


def _port_matches(ports: list[Mapping] | None, target: PodAddress) -> list[str] | None:
    """nft port expressions a rule's `ports` allow on `target` (None: every port; [] : none resolvable)."""
    if not ports:
        return None
    by_protocol: dict[str, list[str]] = {}
    for entry in ports:
        protocol = str(entry.get("protocol") or "TCP")
        port = entry.get("port")
        if port is None:
            by_protocol.setdefault(protocol, [])
            continue
        if isinstance(port, str) and not port.isdigit():
            number = target.ports.get((port, protocol))
            if number is None:
                continue  # a named port the pod does not have allows nothing on it
            by_protocol.setdefault(protocol, []).append(str(number))
            continue
        end = entry.get("endPort")
        by_protocol.setdefault(protocol, []).append(f"{int(port)}-{int(end)}" if end else str(int(port)))
    out = []
    for protocol, numbers in sorted(by_protocol.items()):
        l4 = f"meta l4proto {protocol.lower()}"
        out.append(f"{l4} th dport {{ {', '.join(numbers)} }}" if numbers else l4)
    return out


def ingress_rules(policies: Iterable[dict], pods: list[PodAddress],
                  namespace_labels: Mapping[str, Mapping[str, str]]) -> tuple[list[str], list[str]]:
    """(addresses of pods isolated for ingress, `accept` rules for the traffic their policies allow)."""
    isolated: set[str] = set()
    rules: list[str] = []
    for policy in policies:
        meta, spec = policy.get("metadata") or {}, policy.get("spec") or {}
        types = spec.get("policyTypes") or ["Ingress"]
        if "Ingress" not in types:
            continue
        namespace = meta.get("namespace", "")
        targets = [p for p in pods if p.namespace == namespace and _selector_matches(spec.get("podSelector"), p.labels)]
        isolated.update(p.ip for p in targets)
        for rule in spec.get("ingress") or []:
            peers = rule.get("from")
            sources = None if not peers else [
                s for peer in peers for s in _peer_sources(peer, namespace, pods, namespace_labels)]
            for target in targets:
                ports = _port_matches(rule.get("ports"), target)
                if ports == [] or sources == []:
                    continue
                for source in sources or [""]:
                    for port in ports or [""]:
                        rules.append(" ".join(part for part in (f"ip daddr {target.ip}", source, port, "accept") if part))
    return sorted(isolated), sorted(set(rules))


def table_name(cluster: str) -> str:
    return f"{TABLE}-{cluster}"


def ruleset(isolated: list[str], rules: list[str], table: str = TABLE) -> str:
    """The whole table, for `nft -f`: created empty first so the delete never fails, then replaced at once."""
    elements = f"        elements = {{ {', '.join(isolated)} }}\n" if isolated else ""
    body = "".join(f"        {rule}\n" for rule in rules)
    return (f"table {FAMILY} {table} {{}}\n"
            f"delete table {FAMILY} {table}\n"
            f"table {FAMILY} {table} {{\n"
            f"    set {ISOLATED} {{\n        type ipv4_addr\n{elements}    }}\n"
            f"    chain ingress {{\n{body}        drop\n    }}\n"
            f"    chain forward {{\n"
            f"        type filter hook forward priority filter; policy accept;\n"
            f"        ct state established,related accept\n"
            f"        ip daddr @{ISOLATED} jump ingress\n"
            f"    }}\n"
            f"}}\n")


def removal(table: str = TABLE) -> str:
    return f"table {FAMILY} {table} {{}}\ndelete table {FAMILY} {table}\n"
