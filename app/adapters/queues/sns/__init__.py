"""AWS SNS (``REMINDERS_QUEUE=sns``, the ``[aws]`` extra): publisher and push format
(SNS's signed envelope and subscription handshake)."""

from ..kind import QueueKind, lazy
from .settings import SnsSettings

KIND = QueueKind(
    name="sns",
    max_delay="0 (published when due)",
    publisher=lazy(__name__, "build", "build_sns_publisher"),
    push_format=lazy(__name__, "build", "build_sns_push_format"),
    settings=(SnsSettings,),
    settings_checks=(lazy(__name__, "settings_checks", "check_sns_settings"),),
    extra="aws",
    extra_modules=("aiobotocore", "cryptography"),
)
