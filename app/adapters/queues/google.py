"""What the two Google queue kinds (``cloudtasks``, ``pubsub``) share: the check of
Google's OIDC push tokens, built from ``REMINDERS_GOOGLE_PUSH_*``."""

from __future__ import annotations

from app.adapters.push_formats.google_oidc import (
    GoogleOidcVerifier,
    OidcRequirements,
    build_oidc_verifier,
)

from .parts import QueueParts


def oidc_verifier(parts: QueueParts) -> GoogleOidcVerifier | None:
    """Google's push tokens checker, or None when no push service account is configured."""
    settings = parts.settings
    google = settings.google_push
    if not google.service_account:
        return None
    requirements = OidcRequirements(
        audience=google.audience_for(settings.public_base_url),
        service_account=google.service_account,
        certs_url=google.certs_url,
        clock_skew_seconds=google.clock_skew_seconds,
    )
    return build_oidc_verifier(requirements, parts.shared_http())
