"""A what-if whose change moves nothing says which limit binds (pure parts, table-driven, and the whole compare)."""

import numpy as np
import pytest

from trainyard.schedtrace import metrics as M
from trainyard.whatif.compare import compare
from trainyard.whatif.limits import Wait, bindings, cap_kind, unchanged, why_unchanged
from trainyard.whatif.scenario import TenantTerms, scenario

from stackfiles import config, edited, local_document, tenants


def terms(name="a", capability=16, quota=16) -> TenantTerms:
    caps = [c for c in (capability, quota) if c is not None]
    return TenantTerms(name, name, 1, min(caps) if caps else None, quota, capability, 0, None)


@pytest.mark.parametrize("capability, quota, kind", [
    (16, 16, "queue capability and namespace quota"),
    (8, 16, "queue capability"),
    (16, 8, "namespace quota"),
    (None, 8, "namespace quota"),
    (8, None, "queue capability"),
])
def test_cap_kind_names_the_lower_limit(capability, quota, kind):
    assert cap_kind(terms(capability=capability, quota=quota)) == kind


class OneTenant:
    """A scenario stand-in: one tenant `a` capped at 16 GPUs."""
    tenants = {"a": terms()}


def line_of(held: list[float]) -> M.Timeline:
    t = np.arange(len(held), dtype=float)
    series = np.asarray(held, dtype=float)
    return M.Timeline(t, series, series, {"a": series}, {"a": series})


@pytest.mark.parametrize("held, waits, share, waiting_s", [
    ([16, 16, 16, 16], [Wait("a", 1, 0, 4)], 1.0, 4.0),             # at 16 of 16: even 1 GPU does not fit
    ([8, 8, 8, 8], [Wait("a", 16, 0, 4)], 1.0, 4.0),                # 8 held + a 2x8 gang > 16: the cap holds it
    ([8, 8, 8, 8], [Wait("a", 8, 0, 4)], 0.0, 4.0),                 # 8 + 8 fits under 16: something else holds it
    ([8, 8, 16, 16], [Wait("a", 8, 0, 4)], 0.5, 4.0),               # capped half the time it waited
    ([16, 16, 8, 8], [Wait("a", 8, 0, 2), Wait("a", 16, 2, 4)], 1.0, 4.0),  # the smallest waiting job counts
])
def test_bindings_count_the_moments_the_cap_kept_the_smallest_waiting_job_out(held, waits, share, waiting_s):
    found = bindings(line_of(held), OneTenant, waits)["a"]
    assert (found["at_cap_share"], found["waiting_s"], found["cap_gpus"]) == (share, waiting_s, 16)


def test_a_tenant_that_never_waited_or_has_no_cap_is_not_listed():
    assert bindings(line_of([4, 4]), OneTenant, []) == {}

    class Uncapped:
        tenants = {"a": terms(capability=None, quota=None)}
    assert bindings(line_of([4, 4]), Uncapped, [Wait("a", 1, 0, 2)]) == {}


def test_a_weight_change_under_binding_caps_says_the_caps_bind(tmp_path):
    """The local stack caps both tenants at 16 of 32 GPUs: doubling team-b's weight moves nothing, and the what-if
    says why instead of showing two equal columns."""
    from trainyard.whatif.workload import generated

    base = local_document()
    heavier = edited(base, lambda d: tenants(d)["team-b"]["queue"].update(weight=2))
    current = scenario(config(base, tmp_path, "a.yaml"))
    trace = generated(current, ["team-a", "team-b"], seed=7, jobs=150)
    result = compare(current, scenario(config(heavier, tmp_path, "b.yaml")), trace, seed=7)
    assert unchanged(result)
    lines = why_unchanged(result)
    assert lines[0] == "no effect on this workload:"
    for name in ("team-a", "team-b"):
        assert any(line.startswith(f"  {name} is capped by its queue capability and namespace quota of 16 GPUs")
                   and line.endswith("on both sides") for line in lines), lines


def roomier(doc, weight=1):
    team = tenants(doc)["team-b"]
    team["queue"]["capability"]["nvidia.com/gpu"] = 32
    team["quota"]["gpu"] = 32
    team["queue"]["weight"] = weight


def test_a_raised_cap_under_an_equal_weight_says_the_share_binds_not_the_cap(tmp_path):
    """team-b may hold 32 GPUs now, but with equal weights its share of a contended cluster is still half: it
    never reaches the new cap, and the what-if says that it waits for its share, not at its cap."""
    from trainyard.whatif.workload import generated

    base = local_document()
    current = scenario(config(base, tmp_path, "a.yaml"))
    trace = generated(current, ["team-a", "team-b"], seed=7, jobs=150)
    result = compare(current, scenario(config(edited(base, roomier), tmp_path, "b.yaml")), trace, seed=7)
    assert unchanged(result)
    lines = why_unchanged(result)
    assert any(line.startswith("  team-b waits below its cap: for its share of the cluster") for line in lines), lines
    assert any(line.startswith("  team-a is capped by") for line in lines), lines


def test_a_change_that_moves_something_adds_no_explanation(tmp_path):
    from trainyard.whatif.workload import generated

    base = local_document()
    current = scenario(config(base, tmp_path, "a.yaml"))
    trace = generated(current, ["team-a", "team-b"], seed=7, jobs=150)
    result = compare(current, scenario(config(edited(base, lambda d: roomier(d, weight=4)), tmp_path, "b.yaml")),
                     trace, seed=7)
    assert not unchanged(result) and why_unchanged(result) == []
