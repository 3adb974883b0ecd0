"""The repo root has a platform/ folder; the stdlib `platform` must still import with the root on sys.path.

This reproduces the Pulumi Python runner's conditions: it runs __main__.py with the project
directory as the working directory and first entry of sys.path.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.path.insert(0, {root!r})
import platform
assert hasattr(platform, "python_version"), platform
print("stdlib", platform.__file__)
import os
import trainyard.platform.tokens as ours
print("ours", os.path.realpath(ours.__file__))
"""


def test_stdlib_platform_imports_with_repo_root_first_on_sys_path():
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT))], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    stdlib_line = next(line for line in out.splitlines() if line.startswith("stdlib"))
    assert "site-packages" not in stdlib_line and stdlib_line.endswith("platform.py")
    assert not stdlib_line.startswith(f"stdlib {ROOT}/platform")
    ours_line = next(line for line in out.splitlines() if line.startswith("ours"))
    assert ours_line == f"ours {ROOT / 'platform' / 'tokens.py'}", "trainyard.platform comes from platform/"


def test_platform_folder_has_no_init_py():
    # A regular package there would win over the stdlib module on sys.path.
    assert not (ROOT / "platform" / "__init__.py").exists()
