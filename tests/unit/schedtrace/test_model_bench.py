"""`bench/scheduling_trace.py --model`: the modelled profiles replayed without a cluster, beside real runs."""

import json
from pathlib import Path

from bench_modules import load_bench

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results" / "scheduling_trace.json"


def test_model_mode_replays_each_modelled_profile_per_seed_and_prints_the_calibration(tmp_path, capsys):
    bench = load_bench("scheduling_trace")
    assert bench.main(["--model", "2", "--jobs", "30", "--profiles", "gang,gang-capacity-reclaim,gang-overcommit",
                       "--calibrate", str(RESULTS), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "gang-overcommit: not modelled" in printed
    assert "| gang | " in printed and "| gang-capacity-reclaim | " in printed
    document = json.loads((tmp_path / "scheduling_trace_model.json").read_text())
    assert set(document["results"]) == {"gang", "gang-capacity-reclaim"}
    for runs in document["results"].values():
        assert [r["seed"] for r in runs] == [0, 1]
        assert all(0 < r["allocation"] <= 1 and r["partial_gangs"] == 0 and r["beyond_tier"] == 0 for r in runs)
    assert all(r["evicted_share"] == 0 for r in document["results"]["gang"])
