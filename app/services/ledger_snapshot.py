"""One reading of the ledger for ``/metrics``, and its form in the shared row (JSON).

A process that adopts another's reading (``ledger_metrics.py``) rebuilds the same figures
the reader computed, so its scrape answers exactly as the reader's would."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from .audit import AuditReport
from .deliverability import DeliverabilityFigures
from .operations import LedgerFigures


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """One reading of the ledger; ``figures`` None when that reading failed."""

    figures: LedgerFigures | None = None
    audit: AuditReport | None = None
    deliverability: DeliverabilityFigures | None = None
    taken_at: datetime | None = None  # when the reading ended; None: never read

    def to_stored(self) -> dict[str, Any]:
        """The snapshot as JSON for the shared row (``taken_at`` has a column of its own)."""
        return {
            "figures": None if self.figures is None else asdict(self.figures),
            "audit": None if self.audit is None else _audit_json(self.audit),
            "deliverability": None if self.deliverability is None else asdict(self.deliverability),
        }

    @classmethod
    def from_stored(cls, stored: dict[str, Any], *, taken_at: datetime) -> LedgerSnapshot:
        """The snapshot ``to_stored`` wrote."""
        figures, audit = stored.get("figures"), stored.get("audit")
        deliverability = stored.get("deliverability")
        return cls(
            figures=None if figures is None else _figures(figures),
            audit=None if audit is None else _audit(audit),
            deliverability=None
            if deliverability is None
            else DeliverabilityFigures(
                suppressions=dict(deliverability["suppressions"]),
                emails_sent=int(deliverability["emails_sent"]),
                events=dict(deliverability["events"]),
            ),
            taken_at=taken_at,
        )


def _figures(stored: dict[str, Any]) -> LedgerFigures:
    depth = stored["queue_depth"]
    return LedgerFigures(
        dead_letters=[(reason, count, age) for reason, count, age in stored["dead_letters"]],
        stuck_sends=stored["stuck_sends"],
        oldest_stuck_seconds=stored["oldest_stuck_seconds"],
        sweep_lag_seconds=stored["sweep_lag_seconds"],
        queue_depth=None if depth is None else [(q, state, n) for q, state, n in depth],
        broken_schedules=stored["broken_schedules"],
        settled_24h=dict(stored["settled_24h"]),
    )


def _audit_json(audit: AuditReport) -> dict[str, Any]:
    return {"checked_at": audit.checked_at.isoformat(), "violations": audit.violations}


def _audit(stored: dict[str, Any]) -> AuditReport:
    violations = {name: list(ids) for name, ids in stored["violations"].items()}
    return AuditReport(datetime.fromisoformat(stored["checked_at"]), violations)
