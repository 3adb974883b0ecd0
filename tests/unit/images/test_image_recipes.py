"""Local images: what decides an image's tag, the OCI pieces containerd imports, and the controller image's
inputs (the Dockerfile's file list, hash-pinned dependencies covering pyproject's)."""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest

from trainyard.images import build as B
from trainyard.images import oci
from trainyard.images.lock import lock_lines, project_dependencies
from trainyard.paths import repo_root


def recipe(inputs) -> B.ImageRecipe:
    return B.ImageRecipe("x", tuple(inputs), lambda rootfs, log: None, cmd=("true",))


def test_the_tag_is_a_hash_of_every_input():
    base = recipe([("a", b"1"), ("b", b"2")])
    assert base.tag == recipe([("a", b"1"), ("b", b"2")]).tag, "stable"
    assert base.tag != recipe([("a", b"1"), ("b", b"3")]).tag, "content"
    assert base.tag != recipe([("a", b"1"), ("c", b"2")]).tag, "name"
    assert base.ref == f"trainyard.local/x:{base.tag}" and base.alias == "trainyard.local/x:local"
    inputs = (("a", b"1"), ("b", b"2"))
    for config in ({"cmd": ("false",)}, {"env": (("A", "1"),)}, {"user": "1000:1000"}):
        changed = B.ImageRecipe("x", inputs, lambda rootfs, log: None, **{"cmd": ("true",), **config})
        assert changed.tag != base.tag, f"the image config's {config} decides the image too"


def test_the_training_image_runs_the_stand_in_initializer_by_default():
    """The catalog's initializer containers name no command: the image's default runs the stand-in."""
    recipe = B.training_recipe()
    assert recipe.cmd == ("python3", B.INITIALIZER_SCRIPT)
    sources = dict(recipe.inputs)
    assert "scripts/" + B.INITIALIZER_SCRIPT.rsplit("/", 1)[1] in sources


def test_the_image_config_names_a_numeric_user_only_when_given():
    layer = oci.blob_of(b"layer")
    config = oci.image_config(layer, {"A": "1"}, ["run"], user="65532:65532")["config"]
    assert config["User"] == "65532:65532" and config["Env"] == ["A=1"] and config["Cmd"] == ["run"]
    assert "User" not in oci.image_config(layer, {}, ["run"])["config"]


def test_an_index_names_one_manifest_under_every_ref():
    manifest = oci.blob_of(b"m")
    index = oci.image_index(manifest, ["r/x:abc", "r/x:local"])
    assert [m["annotations"][oci.REF_ANNOTATION] for m in index["manifests"]] == ["r/x:abc", "r/x:local"]
    assert {m["digest"] for m in index["manifests"]} == {manifest.digest}


def dockerfile_context() -> list[str]:
    """Sources of controller/Dockerfile's COPY steps that read the build context (not another stage)."""
    text = (repo_root() / "controller" / "Dockerfile").read_text()
    sources = []
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            *copied, _destination = shlex.split(line[len("COPY "):])
            sources += [s.rstrip("/") for s in copied if s != "tools/kubeflow-trainer"]
    return sources


def test_the_controller_image_is_built_from_the_files_the_dockerfile_copies():
    assert sorted(B.CONTROLLER_CONTEXT) == sorted(dockerfile_context())
    files = B.controller_context()
    assert "pyproject.toml" in files and "controller/runtime/manager.py" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


def test_the_controller_image_changes_with_the_code_it_runs(monkeypatch):
    before = B.controller_recipe().tag
    real = B.controller_context
    monkeypatch.setattr(B, "controller_context", lambda root=None: {**real(root), "controller/new.py": b"x = 1\n"})
    assert B.controller_recipe().tag != before


def test_the_controller_image_does_not_change_with_the_readme(monkeypatch, tmp_path):
    """The README is only the wheel's long description: documentation edits keep the cached image."""
    before = B.controller_recipe().tag
    assert B.controller_context()[B.README] == B.README_IN_IMAGE
    edited = tmp_path / "README.md"
    edited.write_text((repo_root() / "README.md").read_text() + "\nan edit\n")
    real_root = repo_root()
    monkeypatch.setattr(B, "repo_root", lambda: tmp_path)
    for entry in (*B.CONTROLLER_CONTEXT, f"{B.IMAGE_SOURCES}/controller"):
        if entry != B.README:
            (tmp_path / entry).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / entry).symlink_to(real_root / entry)
    assert B.controller_recipe().tag == before


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_controller_lock_pins_every_project_dependency_by_hash():
    lines = [line for line in (repo_root() / B.IMAGE_SOURCES / "controller" / "requirements.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    pinned = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:[0-9a-f]{64}", line)
        assert match, f"not a hash-pinned wheel: {line}"
        pinned[normalized(match.group(1))] = match.group(2)
    for requirement in project_dependencies():
        name = normalized(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))
        assert name in pinned, f"pyproject's {requirement} is missing from the image lock; run python -m trainyard.images.lock"


def test_lock_lines_come_from_pips_report_and_refuse_unhashed_packages():
    report = {"install": [
        {"metadata": {"name": "PyYAML", "version": "6.0"}, "download_info": {"archive_info": {"hashes": {"sha256": "ab"}}}},
        {"metadata": {"name": "attrs", "version": "1"}, "download_info": {"archive_info": {"hashes": {"sha256": "cd"}}}}]}
    assert lock_lines(report) == ["attrs==1 --hash=sha256:cd", "pyyaml==6.0 --hash=sha256:ab"]
    report["install"][0]["download_info"] = {"dir_info": {}}
    with pytest.raises(ValueError, match="PyYAML"):
        lock_lines(report)


def test_the_image_python_is_the_one_pyproject_accepts():
    with open(repo_root() / "pyproject.toml", "rb") as handle:
        requires = tomllib.load(handle)["project"]["requires-python"]
    assert requires == ">=3.11" and B.PYTHON_TAG[0] == "3.11"


def _initializer():
    import importlib.util

    path = repo_root() / "tools" / "images" / "training" / "scripts" / "initializer.py"
    spec = importlib.util.spec_from_file_location("stand_in_initializer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stand_in_initializer_refuses_what_it_cannot_generate(monkeypatch, capsys, tmp_path):
    init = _initializer()
    monkeypatch.setenv("STORAGE_URI", "hf://meta-llama/Llama-3.2-1B-Instruct")
    monkeypatch.setattr(init, "WORKSPACE", tmp_path)
    assert init.main() == 2 and not list(tmp_path.iterdir())
    assert "upstream's initializer images download hf://" in capsys.readouterr().err


def test_the_stand_in_qwen_vocabulary_is_byte_level_bpe():
    """GPT-2's byte-to-character table (what Qwen's tokenizer decodes): printable ASCII as itself, a space as Ġ."""
    chars = _initializer().byte_level_unicode()
    assert len(set(chars)) == 256 and chars[ord("A")] == "A" and chars[ord(" ")] == "Ġ" and chars[10] == "Ċ"
