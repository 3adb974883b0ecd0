"""The host side of real nodes: the pod bridge, per-node cgroup roots, and finding what a node left behind.

Everything here changes the machine (root only) and is undone by `down`; `leftovers` lists what would survive
a bad teardown (mounts, network namespaces, veths, cgroups, processes), for `down` to finish the job and for the
test that proves it does.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

from trainyard.errors import TrainyardError

CGROUP_V1 = Path("/sys/fs/cgroup")


class HostError(TrainyardError, RuntimeError):
    """The host cannot run real nodes as asked; the message says why and what to do."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode:
        raise HostError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def addresses_in(cidr: str) -> list[str]:
    """Interfaces that already hold an address inside `cidr` ("<if> <addr>")."""
    network = ipaddress.ip_network(cidr)
    found = []
    for line in _ip("-o", "-4", "addr", "show").stdout.splitlines():
        parts = line.split()
        address = parts[3].split("/")[0]
        if ipaddress.ip_address(address) in network:
            found.append(f"{parts[1]} {parts[3]}")
    return found


def create_bridge(name: str, addresses: list[str], prefix: int) -> None:
    _ip("link", "add", "name", name, "type", "bridge")
    for address in addresses:
        _ip("addr", "add", f"{address}/{prefix}", "dev", name)
    _ip("link", "set", name, "up")


def add_route(destination: str, device: str, source: str) -> None:
    """A route through `device` with `source` as the local address (gone with the device)."""
    _ip("route", "replace", destination, "dev", device, "src", source)


IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def enable_ip_forwarding(saved: Path) -> None:
    """Turn IPv4 forwarding on, remembering the value it had in `saved` (once: a second call keeps the first)."""
    if not saved.exists():
        saved.write_text(IP_FORWARD.read_text())
    IP_FORWARD.write_text("1\n")


def restore_ip_forwarding(saved: Path) -> None:
    if saved.exists():
        IP_FORWARD.write_text(saved.read_text())
        saved.unlink()


def delete_link(name: str) -> None:
    if link_exists(name):
        _ip("link", "delete", name)


def veths_on(bridge: str) -> list[str]:
    """Interfaces enslaved to the bridge (the host ends of pod veths)."""
    if not link_exists(bridge):
        return []
    return [line.split(":")[1].strip().split("@")[0]
            for line in _ip("-o", "link", "show", "master", bridge).stdout.splitlines()]


def cgroup_controllers() -> list[Path]:
    """The cgroup v1 hierarchies (cpu, memory, ..., and the named systemd/unified ones the kubelet touches)."""
    return [p for p in sorted(CGROUP_V1.iterdir()) if p.is_dir() and not p.is_symlink()]


def create_cgroup_root(relative: str) -> None:
    """The kubelet wants its cgroupRoot in every controller; cpuset needs cpus and mems before tasks can join."""
    for controller in cgroup_controllers():
        directory = controller / relative.lstrip("/")
        directory.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (directory / knob).exists() and not (directory / knob).read_text().strip():
                (directory / knob).write_text((directory.parent / knob).read_text())


def remove_cgroup_root(relative: str) -> list[str]:
    """rmdir the tree bottom-up in every hierarchy; returns the directories that would not go (busy)."""
    stuck = []
    for controller in cgroup_controllers():
        top = controller / relative.lstrip("/")
        if not top.exists():
            continue
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                stuck.append(str(directory))
    return stuck


def cgroup_roots_left(relative: str) -> list[str]:
    return [str(c / relative.lstrip("/")) for c in cgroup_controllers() if (c / relative.lstrip("/")).exists()]


def mounts_under(*roots: Path) -> list[str]:
    """Mount points below any of `roots`, deepest first (the order to unmount them)."""
    prefixes = [str(r.resolve()) for r in roots]
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].replace("\\040", " ")
            if any(point == p or point.startswith(p + "/") for p in prefixes):
                found.append(point)
    return sorted(set(found), key=lambda p: -p.count("/"))


def unmount_all(*roots: Path) -> None:
    for point in mounts_under(*roots):
        subprocess.run(["umount", "-l", point], capture_output=True)


def processes_matching(*needles: str) -> dict[int, str]:
    """Live processes whose command line contains one of `needles` (a containerd socket path, a node dir)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(n in cmdline for n in needles):
            found[int(entry.name)] = cmdline.strip()
    return found


def remove_tree(path: Path) -> None:
    """Remove a directory that held mounts: unmount what is below first, then delete."""
    if path.exists():
        unmount_all(path)
        shutil.rmtree(path, ignore_errors=True)


def iptables_rules_mentioning(*needles: str) -> list[str]:
    """Firewall rules (iptables and nftables, where their tools are installed) that name one of `needles`."""
    found = []
    for argv in (["iptables-save"], ["nft", "list", "ruleset"]):
        if not shutil.which(argv[0]):
            continue
        out = subprocess.run(argv, capture_output=True, text=True).stdout
        found += [line.strip() for line in out.splitlines() if any(n in line for n in needles)]
    return found


KUBELET_CHAINS = (("filter", "KUBE-FIREWALL"), ("mangle", "KUBE-KUBELET-CANARY"), ("nat", "KUBE-KUBELET-CANARY"),
                  ("filter", "KUBE-KUBELET-CANARY"), ("mangle", "KUBE-IPTABLES-HINT"))
"""Chains a kubelet makes where the iptables command exists: KUBE-FIREWALL (jumped to from INPUT and OUTPUT: drops
DNAT-ed traffic to 127.0.0.0/8 from elsewhere), the canaries it watches to notice a flush, and the hint chain
telling kube-proxy which iptables backend is in use. Nothing removes them when a kubelet stops."""


def remove_kubelet_chains() -> None:
    """Delete the kubelets' chains (for IPv4 and IPv6), the jumps into KUBE-FIREWALL first; absent ones are fine."""
    for binary in ("iptables", "ip6tables"):
        if not shutil.which(binary):
            continue

        def run(*args: str) -> bool:
            return subprocess.run([binary, "-w", *args], capture_output=True).returncode == 0

        for hook in ("INPUT", "OUTPUT"):
            while run("-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL"):
                pass
        for table, chain in KUBELET_CHAINS:
            if run("-t", table, "-F", chain):
                run("-t", table, "-X", chain)


CONTAINER_LOG_LINKS = Path("/var/log/containers")
"""Where every kubelet links its containers' logs (a fixed path, shared by the real nodes of this host)."""


def log_links_into(directory: Path) -> list[Path]:
    """Links in /var/log/containers that point into `directory` (a cluster's pod log dirs)."""
    if not CONTAINER_LOG_LINKS.is_dir():
        return []
    return [p for p in CONTAINER_LOG_LINKS.iterdir() if p.is_symlink() and os.readlink(p).startswith(str(directory))]


def pids_in_cgroup(relative: str) -> list[int]:
    """Processes in the cgroup tree (any hierarchy): a node's containers, even when their shim is gone."""
    pids: set[int] = set()
    for controller in cgroup_controllers():
        top = controller / relative.lstrip("/")
        if top.exists():
            for procs in top.rglob("cgroup.procs"):
                try:
                    pids.update(int(p) for p in procs.read_text().split())
                except OSError:
                    continue
    return sorted(pids)
