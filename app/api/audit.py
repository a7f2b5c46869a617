"""``GET /v1/audit``: the ledger's invariants checked now, for operators (admin token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from app.services.audit import run_audit

from .answers import AuditAnswer
from .deps import ConnectionDep, ContainerDep, require_admin_token

router = APIRouter(prefix="/v1", dependencies=[Depends(require_admin_token)], tags=["audit"])


@router.get("/audit", response_model=None, responses={200: {"model": AuditAnswer}})
async def get_audit(conn: ConnectionDep, container: ContainerDep) -> dict[str, Any]:
    """Each invariant, whether it holds, and up to five offending ids (read only)."""
    report = await run_audit(conn, now=container.clock())
    return report.to_json()
