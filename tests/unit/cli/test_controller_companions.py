"""`trainyard controller run`'s companion loops: which run beside the controller, as the options say."""

import pytest
import typer

from trainyard.scheduling.reclaim import DESERVED_TARGET
from trainyard.capacity.reclaimer import Reclaimer
from trainyard.cli.controller import gang_reclaim


@pytest.mark.parametrize("rule", ["deserved", "final-share", "fair-sharing"])
def test_gang_reclaim_runs_by_the_rule_asked_for_and_only_while_leading(rule):
    (factory,) = gang_reclaim(rule, holds=True)
    leader = {"now": False}
    loop = factory(None, lambda: leader["now"])
    assert isinstance(loop, Reclaimer) and (loop.rule, loop.target, loop.holds) == (rule, DESERVED_TARGET, True)
    assert loop.step() is None  # not the leader: no API call at all (the api here is None)


def test_no_reclaim_unless_asked_and_an_unknown_rule_is_refused(capsys):
    assert gang_reclaim("none", holds=True) == ()
    with pytest.raises(typer.Exit) as stopped:
        gang_reclaim("fair", holds=True)
    assert stopped.value.exit_code == 2 and "use one of none, deserved, final-share, fair-sharing" in capsys.readouterr().err


def test_the_reclaim_loop_counts_lost_work_on_the_controllers_metrics_by_namespace():
    """What a suspension throws away goes to `trainyard_reclaim_lost_gpu_seconds_total{namespace}` on the
    controller's /metrics (the usage record's source): the controller writes it, no tenant can."""
    from prometheus_client import generate_latest

    from trainyard.controller.runtime.manager import Metrics

    metrics = Metrics()
    (factory,) = gang_reclaim("fair-sharing", holds=True)
    loop = factory(None, lambda: True, metrics)
    assert loop.on_lost is not None
    loop.on_lost("team-a", 480.0)
    loop.on_lost("team-a", 20.0)
    text = generate_latest(metrics.registry).decode()
    assert 'trainyard_reclaim_lost_gpu_seconds_total{namespace="team-a"} 500.0' in text
