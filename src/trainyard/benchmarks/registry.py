"""The declared benchmarks: one entry per script in bench/, with the figures read from each run's JSON.

A script run by the runner takes `--out DIR` and writes `DIR/<output>` holding a `results` object; every figure is
a dotted path into that object. The runner adds the provenance and the median and spread over the repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A bound a figure must keep: `op` is one of <=, >=, ==."""

    op: str
    value: float

    def met(self, measured: float) -> bool:
        return {"<=": measured <= self.value, ">=": measured >= self.value, "==": measured == self.value}[self.op]


@dataclass(frozen=True)
class Figure:
    key: str
    """Stable name within its bench: documentation quotes `<bench>.<key>`."""
    path: str
    """Dotted path into a run's `results` object."""
    label: str
    unit: str = ""
    scale: float = 1.0
    """Multiplies the stored value for display (0.92 stored, 92 % shown)."""
    digits: int = 1
    target: Target | None = None


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    """Path of the script under the repository root."""
    measures: str
    """One sentence: what the figures say."""
    figures: tuple[Figure, ...]
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] | None = None
    """Arguments of the reduced run `make test` makes (None: too slow or needs a cluster; not in `make test`)."""
    repeat_args: tuple[str, ...] = ()
    """Added to repeat i with `{repeat}` replaced by i (a different seed per repeat gives a real spread)."""
    repeats: int = 3
    long: bool = False
    """Longer than 15 minutes a run, or a cluster of its own: run one by one, not by `--all`."""
    output: str = ""
    """The file the script writes in its --out directory (default `<name>.json`)."""
    minutes: float = 1.0
    """Typical minutes per run on the 2-core reference machine (for the progress line)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def output_file(self) -> str:
        return self.output or f"{self.name}.json"

    def figure(self, key: str) -> Figure:
        for figure in self.figures:
            if figure.key == key:
                return figure
        raise KeyError(f"bench {self.name} has no figure {key!r}; it has {', '.join(f.key for f in self.figures)}")


ZERO = Target("==", 0)

BENCHES: tuple[Bench, ...] = (
    Bench(
        name="bad_input",
        script="bench/bad_input.py",
        measures="Generated broken TrainJob/runtime pairs and stack configs through admission, the CLI checks and "
                 "the build: every one must be admitted or refused with a message a user can act on.",
        args=("--pairs", "10000", "--stacks", "2000"),
        quick_args=("--pairs", "300", "--stacks", "100"),
        repeat_args=("--seed", "{repeat}"),
        minutes=2.0,
        figures=(
            Figure("pairs", "pairs.generated", "TrainJob/runtime pairs per run", digits=0),
            Figure("pairs_unexpected", "pairs.unexpected_exceptions", "pairs: unexpected exceptions", digits=0,
                   target=ZERO),
            Figure("pairs_unclear", "pairs.unclear_messages", "pairs: refusals without a field and a fix", digits=0,
                   target=ZERO),
            Figure("stacks", "stacks.generated", "stack configs per run", digits=0),
            Figure("stacks_unexpected", "stacks.unexpected_exceptions", "stacks: unexpected exceptions", digits=0,
                   target=ZERO),
            Figure("stacks_unclear", "stacks.unclear_messages", "stacks: refusals without a field and a fix",
                   digits=0, target=ZERO),
            Figure("seconds", "seconds", "wall time of a run", unit="s", digits=0),
        ),
    ),
    Bench(
        name="bad_files",
        script="bench/bad_files.py",
        measures="Hostile files (alias bombs, huge counts, bad bytes, typos) through the real CLI under 1 GiB and a "
                 "time limit: each must be refused clearly, never a traceback, an out-of-memory or a timeout.",
        quick_args=("--class", "alias bomb", "--class", "duplicate key"),
        repeats=1,
        minutes=2.0,
        notes=("Deterministic cases: one run says all (the outcome of a case does not vary).",),
        figures=(
            Figure("cases", "cases", "cases", digits=0),
            Figure("refused_clearly", "outcomes.refused clearly", "refused clearly", digits=0),
            Figure("not_refused_clearly", "not_refused_clearly", "anything else (accepted, traceback, OOM, timeout)",
                   digits=0, target=ZERO),
            Figure("seconds", "seconds", "wall time of a run", unit="s", digits=0),
        ),
    ),
    Bench(
        name="whatif",
        script="bench/whatif.py",
        measures="How long `trainyard platform whatif` takes: each stack of stacks/ against itself, a generated "
                 "trace replayed on both sides (stack reading included), and its peak memory.",
        args=("--jobs", "2000"),
        quick_args=("--jobs", "300"),
        repeat_args=("--seed", "{repeat}"),
        minutes=0.5,
        figures=(
            Figure("local_seconds", "stacks.local.seconds", "local stack, 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("dev_seconds", "stacks.dev.seconds", "dev stack, 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("prod_seconds", "stacks.prod.seconds", "prod stack (64 nodes), 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("peak_rss_mib", "peak_rss_mib", "peak resident memory", unit="MiB", digits=0),
        ),
    ),
)

BY_NAME = {bench.name: bench for bench in BENCHES}


def bench_named(name: str) -> Bench:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no bench {name!r}; the benches are {', '.join(BY_NAME)}") from None
