"""The usage part of `trainyard report --since`: the tenants' table for the terminal, and for `--out` the plots,
an HTML section and the JSON rows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from trainyard.timestamps import format_epoch
from trainyard.usage import account, fairness_audit, prometheus as reader, render
from trainyard.usage.plots import write_plots
from trainyard.usage.record import UsageRecord
from trainyard.usage.series import tenant_series


@dataclass(frozen=True)
class UsageWindow:
    record: UsageRecord
    rows: list[account.GroupUsage]

    @classmethod
    def read(cls, since: str, prometheus: str | None, cluster_name: str) -> "UsageWindow":
        until = time.time()
        record = reader.read_record(reader.Prometheus(reader.resolve_url(prometheus, cluster_name)),
                                    until - render.parse_duration(since), until)
        return cls(record=record, rows=account.account(record, "tenant"))

    @property
    def table(self) -> str:
        return render.to_table("tenant", self.rows, self.record.since, self.record.until) + "\n\n" + \
            render.fairness_text(self.fairness)

    @cached_property
    def fairness(self) -> dict:
        return fairness_audit.audit(self.record)

    def json_rows(self) -> list[dict]:
        return [render.row("tenant", usage, self.record.since, self.record.until) for usage in self.rows]

    def write(self, out: Path) -> dict:
        """Write the plots under `out`; returns `write_html`'s extra arguments."""
        title = (f"GPU usage by tenant, {format_epoch(self.record.since)} to "
                 f"{format_epoch(self.record.until)}")
        fairness = self.fairness
        rows = [{"tenant": name, **{k: v for k, v in figures.items() if k != "starvation"}}
                for name, figures in fairness["tenants"].items()]
        return {"extra_sections": [(title, self.json_rows()), (render.fairness_title(fairness), rows)],
                "extra_images": write_plots(tenant_series(self.record), out),
                "extra_json": {"usage": self.json_rows(), "fairness": fairness}}
