"""Local processes are tracked by PID: start, crash (kill), restart with the same command line, stop all."""

import sys

from trainyard.cluster.processes import ProcessSpec, ProcessTable, pid_alive
from waiting import wait_for


def test_start_kill_restart_and_stop_all(tmp_path):
    table = ProcessTable(tmp_path)
    sleeper = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    first = table.start(ProcessSpec("sleeper", sleeper, {"MARK": "1"}))
    assert table.running() == {"sleeper": first}
    log = tmp_path / "logs" / "sleeper.log"
    wait_for(lambda: "up" in log.read_text(), 10, "output in the process's log file", 0.05, error=None)
    assert "up" in log.read_text(), "output goes to the process's log file"
    table.kill("sleeper")
    assert not pid_alive(first)
    assert table.running() == {}
    second = table.restart("sleeper")
    assert second != first and pid_alive(second)
    assert table._entries()["sleeper"]["argv"] == sleeper
    assert table.stop_all() == ["sleeper"]
    assert not pid_alive(second)
    assert not (tmp_path / "processes.json").exists()


SLOW_TO_STOP = """
import signal, socket, sys, time
sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1]))); sock.listen()
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(float(sys.argv[2])), sys.exit(0)))
print("listening", flush=True)
time.sleep(120)
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_restart_starts_the_new_process_only_once_the_old_one_has_let_go_of_its_port(tmp_path):
    """A controller that takes a while to stop keeps its ports until it does; starting its successor earlier
    would see the port taken and exit, and the cluster would be left with no controller at all."""
    table = ProcessTable(tmp_path)
    port = free_port()
    log = tmp_path / "logs" / "server.log"
    first = table.start(ProcessSpec("server", [sys.executable, "-c", SLOW_TO_STOP, str(port), "3"]))
    wait_for(lambda: "listening" in log.read_text(), 10, "first server listening", 0.05)
    second = table.restart("server")
    assert not pid_alive(first)
    wait_for(lambda: log.read_text().count("listening") == 2, 10, "second server listening", 0.05)
    assert pid_alive(second), log.read_text()
    table.kill("server")


def test_restart_kills_a_process_that_ignores_sigterm_past_the_timeout(tmp_path):
    table = ProcessTable(tmp_path)
    port = free_port()
    log = tmp_path / "logs" / "server.log"
    first = table.start(ProcessSpec("server", [sys.executable, "-c", SLOW_TO_STOP, str(port), "60"]))
    wait_for(lambda: "listening" in log.read_text(), 10, "first server listening", 0.05)
    second = table.restart("server", timeout=1)
    assert not pid_alive(first)
    wait_for(lambda: log.read_text().count("listening") == 2, 10, "second server listening", 0.05)
    assert pid_alive(second), log.read_text()
    table.kill("server")
