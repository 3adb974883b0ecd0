"""What a benchmark declares: the script, its figures and their targets (the registry lists them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A bound a figure must keep: `op` is one of <=, >=, == and |x|<= (the size of a signed figure)."""

    op: str
    value: float

    def met(self, measured: float) -> bool:
        return {"<=": measured <= self.value, ">=": measured >= self.value, "==": measured == self.value,
                "|x|<=": abs(measured) <= self.value}[self.op]


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
    """Added to repeat i with `{repeat}` replaced by i and `{seed}` by seeds[i] (a different seed per repeat gives a
    real spread)."""
    seeds: tuple[int, ...] = ()
    repeats: int = 3
    long: bool = False
    """Longer than 15 minutes a run, or a cluster of its own: run one by one, not by `--all`."""
    output: str = ""
    """The file the script writes in its --out directory (default `<name>.json`)."""
    minutes: float = 1.0
    """Typical minutes per run on the 2-core reference machine (for the progress line)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    needs: tuple[str, ...] = ()
    """Benches whose current results this one reads (it is run after them)."""

    @property
    def output_file(self) -> str:
        return self.output or f"{self.name}.json"

    def figure(self, key: str) -> Figure:
        for figure in self.figures:
            if figure.key == key:
                return figure
        raise KeyError(f"bench {self.name} has no figure {key!r}; it has {', '.join(f.key for f in self.figures)}")


ZERO = Target("==", 0)
