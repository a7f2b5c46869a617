"""Google Cloud Tasks push requests: our own JSON body, task metadata in headers.

Cloud Tasks sends the body the publisher put on the task, unchanged. The task name
(``X-CloudTasks-TaskName``) is the message id; ``X-CloudTasks-TaskRetryCount`` counts
earlier attempts. Authentication: Google's OIDC token when an audience and service
account are configured, else the ``sha256=`` HMAC header the publisher set on the task
(no timestamp: a task may wait up to 30 days before its first dispatch).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from app.adapters.push_formats.google_oidc import GoogleOidcVerifier
from app.adapters.push_formats.signatures import check_hmac
from app.domain.errors import MalformedDelivery
from app.domain.messages import Delivery, PushRequest

TASK_NAME_HEADER = "x-cloudtasks-taskname"
RETRY_COUNT_HEADER = "x-cloudtasks-taskretrycount"


class CloudTasksPushFormat:
    """Authenticates Cloud Tasks pushes (OIDC or HMAC) and reads task headers."""

    name = "cloudtasks"

    def __init__(
        self,
        *,
        oidc: GoogleOidcVerifier | None,
        secrets: Sequence[bytes],
        signature_header: str,
    ) -> None:
        if oidc is None and not secrets:
            raise ValueError("Cloud Tasks pushes need OIDC settings or a push secret")
        self._oidc = oidc
        self._secrets = tuple(secrets)
        self._signature_header = signature_header.lower()

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the OIDC token (or else the HMAC) checks out;
        ``AuthenticationUnavailable`` (503) when Google's certificates cannot be fetched."""
        if self._oidc is not None:
            await self._oidc.verify(request.headers, now=now)
            return
        check_hmac(self._secrets, request.body, request.headers.get(self._signature_header))

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """The task name as message id, the body as our payload."""
        task_name = (request.headers.get(TASK_NAME_HEADER) or "").strip()
        if not task_name:
            raise MalformedDelivery("X-CloudTasks-TaskName header is missing")
        try:
            payload = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            raise MalformedDelivery("body is not JSON") from None
        return Delivery(
            queue=queue,
            message_id=task_name[:255],
            payload=payload,
            attempt=_attempt(request.headers.get(RETRY_COUNT_HEADER)),
        )


def _attempt(retry_count: str | None) -> int | None:
    # The retry count is 0 on the first dispatch; our attempts count from 1.
    if retry_count is None or not retry_count.strip().isdigit():
        return None
    return int(retry_count.strip()) + 1
