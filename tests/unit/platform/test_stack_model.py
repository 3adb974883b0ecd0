"""The stack model is the one declaration of the stack's keys: Pulumi.yaml's `config:` must declare the same."""

from pathlib import Path

import yaml

from trainyard.platform.stack_fields import has_default, stack_fields, stack_keys, value_types
from trainyard.platform.stack_model import NAMESPACE, StackConfig

PROJECT = Path(__file__).resolve().parents[3] / "Pulumi.yaml"
PULUMI_TYPES = {"string": (str,), "boolean": (bool,)}


def _project_config() -> dict:
    """Pulumi.yaml `config:` keys of this project's namespace (`tenants` and `trainyard:tenants` are the same key)."""
    config = yaml.safe_load(PROJECT.read_text())["config"]
    return {key.removeprefix(f"{NAMESPACE}:"): spec for key, spec in config.items()
            if ":" not in key or key.startswith(f"{NAMESPACE}:")}


def test_pulumi_yaml_declares_exactly_the_model_keys():
    assert sorted(_project_config()) == sorted(stack_keys(StackConfig))


def test_pulumi_yaml_types_agree_with_the_model():
    for key, spec in _project_config().items():
        kinds = value_types(StackConfig, key)
        if spec["type"] in PULUMI_TYPES:
            assert kinds == PULUMI_TYPES[spec["type"]], key
        else:  # object -> a section dataclass, array -> a tuple of entries
            assert (spec["type"] == "array") == (getattr(kinds[0], "__origin__", None) is tuple), key


def test_pulumi_yaml_defaults_are_only_placeholders_for_optional_keys():
    """The real defaults live in the model; Pulumi.yaml's only make a key optional, so they must say nothing."""
    for key, spec in _project_config().items():
        assert ("default" in spec) == has_default(stack_fields(StackConfig)[key]), f"{key}: required in one, not the other"
        assert not spec.get("default"), f"{key}: put its default in platform/stack_model.py"
