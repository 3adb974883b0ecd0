"""The cheap benches run in `make test` at reduced size, through the same runner as `make bench`, and fail when a
figure crosses its target; the documentation's figures are what the results files say."""

import json

import pytest
from typer.testing import CliRunner

from trainyard.benchmarks.aggregate import FORMAT, missed_targets
from trainyard.benchmarks.registry import BENCHES
from trainyard.benchmarks.runner import run_bench
from trainyard.cli.main import app
from trainyard.paths import repo_root


@pytest.mark.parametrize("bench", [b for b in BENCHES if b.quick_args is not None], ids=lambda b: b.name)
def test_reduced_run_keeps_every_target(bench, tmp_path):
    """A bench reading another's results (the model against the real scheduler's replays) needs them current:
    the results files are part of the repository, so a missing one fails here rather than skipping."""
    for needed in bench.needs:
        document = json.loads((repo_root() / "bench" / "results" / f"{needed}.json").read_text())
        assert document.get("format") == FORMAT and not document.get("quick"), f"rerun `trainyard bench run {needed}`"
    document = run_bench(bench, repo_root(), tmp_path, quick=True, echo=lambda _: None)
    assert document["exit_codes"] == [0], document["runs"]
    assert missed_targets(document) == []
    written = json.loads((tmp_path / f"{bench.name}.json").read_text())
    assert written["quick"] is True and written["commit"] and written["machine"]["cores"] >= 1
    assert "load_average_1m_after" in written["machine"]


def test_docs_quote_what_the_results_files_say():
    result = CliRunner().invoke(app, ["bench", "docs", "--check"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, code, words", [
    (["bench", "run"], 2, "name the benches to run, or give --all"),
    (["bench", "run", "fast", "--all"], 2, "name the benches to run, or give --all"),
    (["bench", "run", "no_such_bench"], 2, "no bench 'no_such_bench'; the benches are bad_input"),
    (["bench", "run", "scale", "--quick"], 2, "scale has no reduced run; drop --quick"),
])
def test_bench_run_refuses_what_it_cannot_run_and_says_what_to_do(args, code, words):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code and words in result.output, result.output


def test_bench_list_json_names_every_bench_and_whether_make_test_runs_it():
    rows = json.loads(CliRunner().invoke(app, ["bench", "list", "--json"]).output)
    assert [row["name"] for row in rows] == [b.name for b in BENCHES]
    assert {row["name"] for row in rows if row["in_make_test"]} >= {"bad_input", "bad_files", "whatif",
                                                                     "model_calibration"}


def test_runs_whose_output_lacks_a_declared_figure_are_kept_and_the_error_names_them(tmp_path):
    """A long run is not lost when its script and the registry disagree: the runs are written beside the results."""
    import dataclasses

    from trainyard.benchmarks.aggregate import FigureMissing
    from trainyard.benchmarks.declarations import Figure
    from trainyard.benchmarks.registry import bench_named

    whatif = bench_named("whatif")
    broken = dataclasses.replace(whatif, figures=(Figure("absent", "no.such.figure", "absent"),))
    with pytest.raises(FigureMissing, match="runs are kept in"):
        run_bench(broken, repo_root(), tmp_path, quick=True, echo=lambda _: None)
    kept = json.loads((tmp_path / "whatif.runs-without-figures.json").read_text())
    assert len(kept["runs"]) == 1 and kept["runs"][0]["results"]["stacks"]["local"]["seconds"] > 0
    assert not (tmp_path / "whatif.json").exists()
