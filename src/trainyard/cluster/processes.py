"""Start and stop the long-running local processes a cluster needs, tracked by PID files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainyard.waiting import wait_for


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    env: dict[str, str] | None = None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class ProcessTable:
    """PIDs of the processes `up` started, in <cluster dir>/processes.json."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.file = directory / "processes.json"
        self.log_dir = directory / "logs"

    def _entries(self) -> dict[str, dict]:
        if not self.file.exists():
            return {}
        return json.loads(self.file.read_text())

    def load(self) -> dict[str, int]:
        return {name: int(entry["pid"]) for name, entry in self._entries().items()}

    def _save(self, entries: dict[str, dict]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps(entries, indent=2, sort_keys=True))

    def start(self, spec: ProcessSpec) -> int:
        """Start detached (own session, so a Ctrl-C of the caller leaves it running), log to a file."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{spec.name}.log", "ab")
        proc = subprocess.Popen(
            spec.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(spec.env or {})}, start_new_session=True,
        )
        log.close()
        entries = self._entries()
        entries[spec.name] = {"pid": proc.pid, "argv": spec.argv, "env": spec.env or {}}
        self._save(entries)
        return proc.pid

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process abruptly (tests use it to simulate a crash)."""
        pid = self.load()[name]
        _signal_group(pid, sig)
        wait_for(lambda: not pid_alive(pid), 10, f"{name} (pid {pid}) gone", 0.05, error=None)

    def stop(self, name: str, timeout: float = 15.0) -> None:
        """SIGTERM one process group (SIGKILL after `timeout`) and forget it; a name not recorded is ignored."""
        entries = self._entries()
        if name not in entries:
            return
        _terminate(name, int(entries[name]["pid"]), timeout)
        del entries[name]
        self._save(entries)

    def restart(self, name: str, timeout: float = 15.0) -> int:
        """Start a recorded process again with the same command line, once the old one is gone.

        The old one gets SIGTERM, then SIGKILL after `timeout`: a new one started beside a process still
        shutting down would find its ports taken and exit, leaving nothing running once the old one ends."""
        entry = self._entries()[name]
        _terminate(name, int(entry["pid"]), timeout)
        return self.start(ProcessSpec(name, entry["argv"], entry.get("env") or None))

    def running(self) -> dict[str, int]:
        return {name: pid for name, pid in self.load().items() if pid_alive(pid)}

    def stop_all(self, timeout: float = 15.0) -> list[str]:
        """SIGTERM every recorded process group, then SIGKILL what is left. Returns the names stopped."""
        table = self.load()
        for pid in table.values():
            _signal_group(pid, signal.SIGTERM)
        wait_for(lambda: not any(pid_alive(p) for p in table.values()), timeout, "every process gone", 0.2, error=None)
        for pid in table.values():
            if pid_alive(pid):
                _signal_group(pid, signal.SIGKILL)
        if self.file.exists():
            self.file.unlink()
        return sorted(table)


def _terminate(name: str, pid: int, timeout: float) -> None:
    """SIGTERM the process group of `pid`, SIGKILL after `timeout`; returns once the process is gone."""
    if not pid_alive(pid):
        return
    _signal_group(pid, signal.SIGTERM)
    if not wait_for(lambda: not pid_alive(pid), timeout, f"{name} (pid {pid}) gone", 0.1, error=None):
        _signal_group(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), 10, f"{name} (pid {pid}) gone", 0.05)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_for_port(port: int, timeout: float, alive=lambda: True) -> bool:
    """True once something listens on `port`; False on timeout or as soon as `alive()` says the process
    that would listen is gone."""
    def listening_or_dead() -> bool | str:
        if port_in_use(port):
            return True
        return False if alive() else "dead"  # truthy: ends the wait

    return wait_for(listening_or_dead, timeout, f"port {port}", 0.25, error=None) is True
