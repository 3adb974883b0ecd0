"""The bench registry, the results document and the docs generated from it (pure parts, table-driven)."""

from pathlib import Path

import pytest

from trainyard.benchmarks import docs as D
from trainyard.benchmarks.aggregate import FORMAT, FigureMissing, missed_targets, results_document, value_at
from trainyard.benchmarks.declarations import Bench, Figure, Target
from trainyard.benchmarks.registry import BENCHES

ROOT = Path(__file__).resolve().parents[3]

BENCH = Bench(name="toy", script="bench/toy.py", measures="A toy.", repeats=3, figures=(
    Figure("speed", "speed.seconds", "seconds per run", unit="s", target=Target("<=", 10)),
    Figure("share", "share", "share kept", unit="%", scale=100, digits=1, target=Target(">=", 0.9)),
    Figure("errors", "errors", "errors", digits=0, target=Target("==", 0)),
))
RECORD = {"command": "trainyard bench run toy", "commit": "0123456789abcdef", "date": "2026-01-01T00:00:00Z",
          "script_command": "bench/toy.py --out DIR",
          "machine": {"cores": 2, "load_average_1m_before": 0.5, "load_average_1m_after": 1.5}}


def run(seconds, share, errors):
    return {"results": {"speed": {"seconds": seconds}, "share": share, "errors": errors}}


def document(*runs, quick=False):
    return results_document(BENCH, list(runs), dict(RECORD), quick=quick, exit_codes=[0] * len(runs),
                            wall_seconds=[1.0] * len(runs))


@pytest.mark.parametrize("path,expected", [("a", 1.0), ("b.c", 2.5), ("b.with space", 3.0)])
def test_value_at_follows_dotted_paths(path, expected):
    assert value_at({"a": 1, "b": {"c": 2.5, "with space": 3}}, path) == expected


@pytest.mark.parametrize("doc,path", [({}, "a"), ({"a": {"b": 1}}, "a"), ({"a": "x"}, "a"), ({"a": True}, "a"),
                                      ({"a": 1}, "a.b")])
def test_value_at_refuses_what_is_not_a_number_at_the_path(doc, path):
    with pytest.raises(FigureMissing):
        value_at(doc, path)


def test_results_document_holds_median_spread_and_targets():
    doc = document(run(4, 0.95, 0), run(12, 0.91, 0), run(5, 0.93, 0))
    speed = doc["figures"]["speed"]
    assert (speed["median"], speed["min"], speed["max"], speed["runs"]) == (5, 4, 12, 3)
    assert speed["met"] is False and doc["figures"]["share"]["met"] is True
    assert doc["format"] == FORMAT and doc["repeats"] == 3 and doc["targets_met"] is False
    assert missed_targets(doc) == ["toy.speed (seconds per run): [4.0, 12.0, 5.0] not <= 10"]


@pytest.mark.parametrize("figure,value,text", [
    (BENCH.figures[0], 4.56, "4.6 s"),
    (BENCH.figures[1], 0.9234, "92.3 %"),
    (BENCH.figures[2], 1234.0, "1,234"),
])
def test_numbers_are_shown_in_the_figures_unit(figure, value, text):
    assert D.number(value, figure) == text


def test_benchmarks_page_shows_current_figures_and_withholds_the_rest():
    current = document(run(4, 0.95, 0), run(6, 0.91, 0), run(5, 0.93, 0))
    section = D.bench_section(BENCH, current)
    assert "| seconds per run | 5.0 s | 4.0 s to 6.0 s | <= 10.0 s: met |" in section
    assert "| share kept | 93.0 % | 91.0 % to 95.0 % | >= 90.0 %: met |" in section
    assert "Commit `0123456789ab`" in section and "3 runs" in section
    for stale in (None, {"figures": {}}, document(run(4, 0.95, 0), quick=True)):
        section = D.bench_section(BENCH, stale)
        assert "No current results" in section and "|" not in section


def test_markers_quote_the_median_and_refuse_a_stale_file(monkeypatch):
    monkeypatch.setattr(D, "bench_named", lambda name: BENCH)
    current = document(run(4, 0.95, 0), run(6, 0.91, 0), run(5, 0.93, 0))
    text = "took <!-- fig toy.speed -->99 s<!-- /fig --> and kept <!-- fig toy.share -->1 %<!-- /fig -->."
    assert D.refresh_markers(text, {"toy": current}) == (
        "took <!-- fig toy.speed -->5.0 s<!-- /fig --> and kept <!-- fig toy.share -->93.0 %<!-- /fig -->.")
    with pytest.raises(D.StaleFigure, match="rerun it or remove the figure"):
        D.refresh_markers(text, {"toy": None})


def test_every_declared_bench_has_its_script_taking_out_and_unique_figures():
    for bench in BENCHES:
        script = ROOT / bench.script
        assert script.is_file(), bench.script
        assert '"--out"' in script.read_text(), f"{bench.script} takes no --out"
        keys = [f.key for f in bench.figures]
        assert len(keys) == len(set(keys)), bench.name
        assert bench.long or bench.repeats >= 3 or bench.notes, f"{bench.name}: under 15 min needs 3 repeats or a note"
    assert len({b.name for b in BENCHES}) == len(BENCHES)


def test_results_files_are_written_only_by_the_runner():
    """A results file of a declared bench is either absent, or a document of `trainyard bench run`."""
    import json

    for bench in BENCHES:
        path = ROOT / "bench" / "results" / f"{bench.name}.json"
        if path.is_file():
            doc = json.loads(path.read_text())
            if doc.get("format") == FORMAT:
                assert doc["bench"] == bench.name and len(doc["runs"]) == doc["repeats"]
                assert set(doc["figures"]) == {f.key for f in bench.figures}


@pytest.mark.parametrize("output, counts", [
    ("..\n==== 2259 passed in 2603.12s (0:43:23) ====\n", {"passed": 2259, "pytest_seconds": 2603.12}),
    ("= 3 failed, 10 passed, 2 skipped in 12.5s =", {"failed": 3, "passed": 10, "skipped": 2, "pytest_seconds": 12.5}),
    ("= slowest 25 durations =\n= 7 passed in 1.0s =", {"passed": 7, "pytest_seconds": 1.0}),
    ("..\n2446 passed, 3 warnings in 2630.19s (0:43:50)\nException occurred during processing of request",
     {"passed": 2446, "warnings": 3, "pytest_seconds": 2630.19}),                      # -q: no banners
    ("no summary", {}),
    ("took 12 passes in 3s of thought", {}),
])
def test_suite_bench_reads_the_last_pytest_summary(output, counts):
    from bench_modules import load_bench

    assert load_bench("suite").pytest_counts(output) == counts


@pytest.mark.parametrize("op, value, measured, met", [
    ("<=", 10, 10, True), ("<=", 10, 10.1, False), (">=", 0.9, 0.89, False), ("==", 0, 0, True),
    ("|x|<=", 5, -5.4, False), ("|x|<=", 5, -4.9, True), ("|x|<=", 5, 5.0, True),
])
def test_targets(op, value, measured, met):
    assert Target(op, value).met(measured) is met


def test_the_page_judges_every_run_against_the_target_declared_now():
    """A target declared after the run is judged on the run's stored values, not on the verdict stored then."""
    figure = Figure("dev", "dev", "deviation", unit="points", target=Target("|x|<=", 5))
    stored = {"values": [-5.42, -3.9, -4.0], "met": True}
    assert D.target_words(figure, stored) == "within ±5.0 points: **missed**"



def test_a_run_is_dirty_for_changed_code_not_for_results_files_written_before_it(tmp_path, monkeypatch):
    """`trainyard bench run a b`: b's run starts after a's results file was written; that file is an output, not
    something b's figures depend on."""
    import subprocess

    from trainyard.benchkit import RESULTS_DIR, run_record

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / RESULTS_DIR).mkdir(parents=True)
    (tmp_path / RESULTS_DIR / "a.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.chdir(tmp_path)
    (tmp_path / RESULTS_DIR / "a.json").write_text('{"figures": {}}')
    assert not run_record(["b"])["commit"].endswith("+dirty")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert run_record(["b"])["commit"].endswith("+dirty")
