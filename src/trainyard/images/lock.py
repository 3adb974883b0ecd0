"""Write tools/images/controller/requirements.txt: the project's runtime dependencies, resolved for the image's
Python (bookworm's 3.11, manylinux x86_64) at the versions the development venv runs, each pinned by the hash
of its PyPI wheel. Re-run after changing pyproject's dependencies:

    .venv/bin/python -m trainyard.images.lock
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from trainyard.images.build import IMAGE_SOURCES, PYTHON_TAG
from trainyard.paths import repo_root

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64")
HEADER = """# Python packages of the controller image: the project's runtime dependencies (pyproject.toml), resolved for
# bookworm's Python 3.11 at the versions the development venv runs, each pinned by its wheel's hash.
# Installed with --require-hashes --no-deps. Regenerate: .venv/bin/python -m trainyard.images.lock
"""


def project_dependencies() -> list[str]:
    with open(repo_root() / "pyproject.toml", "rb") as handle:
        return list(tomllib.load(handle)["project"]["dependencies"])


def lock_lines(report: dict) -> list[str]:
    """`name==version --hash=sha256:...` per package of a `pip install --report`, sorted by name."""
    lines = []
    for item in report["install"]:
        metadata, archive = item["metadata"], item["download_info"].get("archive_info") or {}
        digest = (archive.get("hashes") or {}).get("sha256")
        if not digest:
            raise ValueError(f"{metadata['name']} has no sha256 in pip's report (not a wheel from an index?)")
        lines.append(f"{metadata['name'].lower()}=={metadata['version']} --hash=sha256:{digest}")
    return sorted(lines)


def main() -> None:
    version, implementation = PYTHON_TAG
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                                capture_output=True, text=True).stdout
        (work / "constraints.txt").write_text("".join(line + "\n" for line in freeze.splitlines()
                                                      if line and not line.startswith(("-e", "trainyard"))))
        (work / "requirements.in").write_text("\n".join(project_dependencies()) + "\n")
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                        "--only-binary=:all:", "--python-version", version, "--implementation", implementation,
                        *platforms, "--target", str(work / "target"), "--report", str(work / "report.json"),
                        "-c", str(work / "constraints.txt"), "-r", str(work / "requirements.in")], check=True)
        lines = lock_lines(json.loads((work / "report.json").read_text()))
    target = repo_root() / IMAGE_SOURCES / "controller" / "requirements.txt"
    target.write_text(HEADER + "\n".join(lines) + "\n")
    print(f"wrote {len(lines)} pins to {target}")


if __name__ == "__main__":
    main()
