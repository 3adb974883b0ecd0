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
