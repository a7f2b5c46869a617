"""A scripted channel provider standing in for a third-party service we cannot run here.

It implements the real ``ChannelProvider`` Protocol; each call pops the next scripted
step (a ``SendResult`` or an exception to raise). ``gate`` lets a test hold a send
open to stage races deterministically.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from app.domain.messages import RenderedMessage, SendResult


@dataclass
class SentCall:
    message: RenderedMessage
    idempotency_key: str
    timeout: float


@dataclass
class ScriptedProvider:
    name: str = "scripted"
    script: list[SendResult | Exception] = field(default_factory=list)
    calls: list[SentCall] = field(default_factory=list)
    gate: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        self.calls.append(SentCall(message, idempotency_key, timeout))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        step = self.script.pop(0) if self.script else SendResult(f"req-{len(self.calls)}")
        if isinstance(step, Exception):
            raise step
        return step
