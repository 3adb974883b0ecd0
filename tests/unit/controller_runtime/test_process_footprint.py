"""The controller process imports what it uses and nothing heavier: the `kubernetes` client's generated models
alone were 40 MiB of its resident memory (issue 21: RSS within 1.25x of upstream's Go controller)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("kubernetes", "matplotlib", "numpy", "pulumi", "requests", "jinja2")


def test_the_controller_entry_point_loads_no_heavy_library():
    # VmRSS, not ru_maxrss: Linux keeps the peak of the forking parent (pytest) across execve
    probe = ("import json, sys; import trainyard.cli.controller; "
             f"print(json.dumps({{'loaded': sorted(m for m in {HEAVY!r} if m in sys.modules), "
             "'rss_mib': [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')][0] / 1024}))")
    answer = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                                       text=True).stdout)
    assert answer["loaded"] == []
    assert answer["rss_mib"] < 48, answer  # 31 MiB measured (72 MiB with the kubernetes client)
