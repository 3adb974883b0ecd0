"""NetworkPolicy ingress rules compiled to nftables for the real nodes (pure, table-driven); `nft --check`
accepts the ruleset they make."""

from __future__ import annotations

import subprocess

import pytest

from trainyard.realnodes import network_policy as NP
from trainyard.realnodes.nodes import HOST_PACKAGES
from trainyard.toolchain.host_packages import ensure_host_packages


def pod(ns, name, ip, labels=None, ports=(), phase="Running", host_network=False):
    return {"metadata": {"namespace": ns, "name": name, "labels": labels or {}},
            "spec": {"hostNetwork": host_network, "containers": [
                {"name": "c", "ports": [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in ports]}]},
            "status": {"podIP": ip, "phase": phase}}


PODS = NP.pod_addresses([
    pod("team-b", "server", "10.244.1.10", {"app": "server"}, ports=(("http", 8080),)),
    pod("team-b", "peer", "10.244.2.11", {"app": "peer"}),
    pod("team-a", "client", "10.244.2.20", {"app": "client"}),
    pod("team-a", "done", "10.244.2.21", phase="Succeeded"),
    pod("team-a", "hostnet", "192.168.0.5", host_network=True),
    pod("team-a", "pending", None),
])
NAMESPACES = {"team-a": {"kubernetes.io/metadata.name": "team-a", "tier": "batch"},
              "team-b": {"kubernetes.io/metadata.name": "team-b"}}


def policy(ns, spec):
    return {"metadata": {"namespace": ns, "name": "p"}, "spec": spec}


DEFAULT_DENY = policy("team-b", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]})


def test_only_running_pods_with_their_own_address_are_considered():
    assert [p.name for p in PODS] == ["server", "peer", "client"]


@pytest.mark.parametrize("policies, isolated, rules", [
    ([], [], []),
    # the platform's default deny: team-b's pods take traffic from team-b only
    ([DEFAULT_DENY], ["10.244.1.10", "10.244.2.11"],
     ["ip daddr 10.244.1.10 ip saddr { 10.244.1.10, 10.244.2.11 } accept",
      "ip daddr 10.244.2.11 ip saddr { 10.244.1.10, 10.244.2.11 } accept"]),
    # a namespace selector and a named port
    ([policy("team-b", {"podSelector": {"matchLabels": {"app": "server"}}, "ingress": [
        {"from": [{"namespaceSelector": {"matchLabels": {"tier": "batch"}}}], "ports": [{"port": "http"}]}]})],
     ["10.244.1.10"], ["ip daddr 10.244.1.10 ip saddr { 10.244.2.20 } meta l4proto tcp th dport { 8080 } accept"]),
    # every source, a port range over UDP; an egress-only policy isolates nothing for ingress
    ([policy("team-b", {"podSelector": {"matchLabels": {"app": "peer"}}, "ingress": [
        {"ports": [{"protocol": "UDP", "port": 5000, "endPort": 5010}]}]}),
      policy("team-a", {"podSelector": {}, "policyTypes": ["Egress"]})],
     ["10.244.2.11"], ["ip daddr 10.244.2.11 meta l4proto udp th dport { 5000-5010 } accept"]),
    # ipBlock with an exception; an ingress list with no rules allows nothing
    ([policy("team-b", {"podSelector": {"matchLabels": {"app": "server"}}, "ingress": [
        {"from": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.2.0/24"]}}]}]}),
      policy("team-a", {"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["client"]}]},
                        "ingress": []})],
     ["10.244.1.10", "10.244.2.20"], ["ip daddr 10.244.1.10 ip saddr 10.244.0.0/16 ip saddr != { 10.244.2.0/24 } accept"]),
    # a named port the pod lacks allows nothing
    ([policy("team-b", {"podSelector": {"matchLabels": {"app": "peer"}}, "ingress": [{"ports": [{"port": "http"}]}]})],
     ["10.244.2.11"], []),
])
def test_ingress_policies_compile_to_isolated_addresses_and_accept_rules(policies, isolated, rules):
    assert NP.ingress_rules(policies, PODS, NAMESPACES) == (isolated, rules)


def test_nft_accepts_the_ruleset():
    """`nft` is one of the Debian packages real nodes need (`realnodes.nodes`), installed here as `cluster up`
    installs it: on a fresh machine the unit tests may run before any real node was started."""
    ensure_host_packages(HOST_PACKAGES)
    text = NP.ruleset(*NP.ingress_rules([DEFAULT_DENY], PODS, NAMESPACES), table=NP.table_name("unit"))
    checked = subprocess.run(["nft", "--check", "-f", "-"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr + text
