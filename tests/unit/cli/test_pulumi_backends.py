"""Only the local stack gets the offline file backend; shared environments keep the user's backend and secrets."""

from __future__ import annotations

import json

import pytest

from trainyard import stack_deploy
from trainyard.pulumi_env import offline_env, shared_env, user_backend

USER_ENV = {"PATH": "/usr/bin", "PULUMI_BACKEND_URL": "s3://team-bucket/trainyard", "PULUMI_CONFIG_PASSPHRASE": "s3cret",
            "PULUMI_HOME": "/home/me/.pulumi"}


def test_shared_environments_keep_the_users_backend_home_and_passphrase():
    env = shared_env(dict(USER_ENV))
    assert {k: env[k] for k in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_HOME")} == {
        "PULUMI_BACKEND_URL": "s3://team-bucket/trainyard", "PULUMI_CONFIG_PASSPHRASE": "s3cret",
        "PULUMI_HOME": "/home/me/.pulumi"}
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert "pulumi-kubernetes" in env["PATH"].split(":")[2], "the built provider is found on PATH"


def test_shared_environment_adds_no_backend_of_its_own():
    assert "PULUMI_BACKEND_URL" not in shared_env({"PATH": "/usr/bin"})
    assert "PULUMI_CONFIG_PASSPHRASE" not in shared_env({"PATH": "/usr/bin"})


def test_the_local_stack_gets_a_file_backend_in_the_given_directory(tmp_path):
    env = offline_env(dict(USER_ENV), backend_dir=tmp_path / "state")
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert env["PULUMI_HOME"].endswith("pulumi/home")


def test_the_local_stack_saves_its_state_once_per_update_unless_the_user_says_otherwise(tmp_path):
    assert offline_env({"PATH": "/usr/bin"}, backend_dir=tmp_path)["PULUMI_SKIP_CHECKPOINTS"] == "true"
    kept = offline_env({"PATH": "/usr/bin", "PULUMI_SKIP_CHECKPOINTS": "false"}, backend_dir=tmp_path)
    assert kept["PULUMI_SKIP_CHECKPOINTS"] == "false"
    assert "PULUMI_SKIP_CHECKPOINTS" not in shared_env({"PATH": "/usr/bin"}), "shared stacks checkpoint every step"


@pytest.mark.parametrize("env,credentials,expected", [
    ({"PULUMI_BACKEND_URL": "gs://b"}, None, "gs://b"),
    ({}, {"current": "https://api.pulumi.com"}, "https://api.pulumi.com"),
    ({}, {"current": ""}, None),
    ({}, None, None),
])
def test_user_backend_comes_from_the_environment_or_pulumi_login(tmp_path, env, credentials, expected):
    if credentials is not None:
        (tmp_path / "credentials.json").write_text(json.dumps(credentials))
    assert user_backend(env, home=tmp_path) == expected


def test_a_shared_stack_without_a_backend_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))  # no `pulumi login` there
    with pytest.raises(stack_deploy.StackError, match=r"stack 'prod' is a shared environment.*pulumi login s3://"):
        stack_deploy.resolve_target("prod")


def test_a_shared_stack_uses_its_reviewed_file_and_the_users_backend(monkeypatch):
    monkeypatch.setenv("PULUMI_BACKEND_URL", "s3://team-bucket/trainyard")
    target = stack_deploy.resolve_target("dev")
    assert target.backend_dir is None and target.config_file == stack_deploy.stack_file("dev")
    assert target.env()["PULUMI_BACKEND_URL"] == "s3://team-bucket/trainyard"
