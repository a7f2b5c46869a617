"""SNS and QStash settings: what each kind needs, the per-channel kind, the push URL."""

import pytest
from pydantic import ValidationError

from tests.conftest import make_settings

TOPIC = "arn:aws:sns:eu-west-1:123456789012:reminders"
QSTASH = {
    "qstash": {
        "token": "qstash-token-0123456789",
        "current_signing_key": "sig_current_0123456789abcdefghijkl",
    }
}


def test_sns_needs_a_topic_for_every_queue_it_serves(tmp_path):
    """Each SNS queue name needs its topic ARN; the region comes from the ARN."""
    with pytest.raises(ValidationError, match="no topic for queue"):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, queue="sns")
    settings = make_settings(
        "sqlite+aiosqlite:///x.db", tmp_path, queue="sns", sns={"topic_arns": {"reminders": TOPIC}}
    )
    assert settings.sns.region_name() == "eu-west-1"
    assert settings.queue_kinds == {"reminders": "sns"}


def test_sns_topics_parse_from_queue_arn_pairs(monkeypatch, tmp_path):
    """REMINDERS_SNS_TOPIC_ARNS is `queue=arn` pairs; anything else is refused by name."""
    monkeypatch.setenv("REMINDERS_SNS_TOPIC_ARNS", f"reminders={TOPIC}, hooks={TOPIC}-hooks")
    settings = make_settings("sqlite+aiosqlite:///x.db", tmp_path, queue="sns")
    assert settings.sns.topic_arns == {"reminders": TOPIC, "hooks": f"{TOPIC}-hooks"}
    monkeypatch.setenv("REMINDERS_SNS_TOPIC_ARNS", "reminders")
    with pytest.raises(ValidationError, match="queue=arn"):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, queue="sns")


def test_qstash_needs_a_token_and_a_signing_key(tmp_path):
    """Without the token or the current signing key the service refuses to start."""
    with pytest.raises(ValidationError, match="QSTASH_TOKEN"):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, queue="qstash")
    settings = make_settings("sqlite+aiosqlite:///x.db", tmp_path, queue="qstash", **QSTASH)
    assert settings.qstash.signing_keys() == [b"sig_current_0123456789abcdefghijkl"]


def test_one_channel_may_use_another_kind_on_its_own_queue(tmp_path):
    """Webhooks through QStash, email through the embedded queue; one name, one kind."""
    settings = make_settings(
        "sqlite+aiosqlite:///x.db", tmp_path, webhook_queue="hooks", webhook_queue_kind="qstash",
        public_base_url="https://reminders.example.com/", **QSTASH,
    )  # fmt: skip
    assert settings.queue_kinds == {"reminders": "embedded", "hooks": "qstash"}
    assert settings.push_url("hooks") == "https://reminders.example.com/push/hooks"
    with pytest.raises(ValidationError, match="two kinds"):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, webhook_queue_kind="qstash", **QSTASH)


def test_the_catch_up_margin_has_a_floor(tmp_path):
    """A margin under a minute would republish messages that are merely in flight."""
    with pytest.raises(ValidationError):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, catchup_margin_seconds=5)
