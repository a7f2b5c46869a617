"""Settings of the Google queues: required places, and no queue allowed to give up first."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.adapters.queues.cloudtasks.settings import CloudTasksSettings
from app.adapters.queues.pubsub.settings import PubSubSettings
from tests.conftest import make_settings


def build(tmp_path, **overrides):
    return make_settings("sqlite+aiosqlite:///unused.db", tmp_path, **overrides)


def test_cloudtasks_needs_a_project_and_a_location(tmp_path):
    """REMINDERS_QUEUE=cloudtasks without REMINDERS_CLOUDTASKS_PROJECT/_LOCATION is refused."""
    with pytest.raises(ValidationError, match="CLOUDTASKS_PROJECT"):
        build(tmp_path, queue="cloudtasks")
    build(tmp_path, queue="cloudtasks", cloudtasks=CloudTasksSettings(project="p", location="l"))


def test_pubsub_needs_a_project(tmp_path):
    """REMINDERS_QUEUE=pubsub without REMINDERS_PUBSUB_PROJECT is refused."""
    with pytest.raises(ValidationError, match="PUBSUB_PROJECT"):
        build(tmp_path, queue="pubsub")


def test_a_queue_may_not_give_up_before_our_own_attempts(tmp_path):
    """Pub/Sub delivery attempts and Cloud Tasks attempts must exceed REMINDERS_MAX_ATTEMPTS."""
    with pytest.raises(ValidationError, match="MAX_DELIVERY_ATTEMPTS"):
        build(
            tmp_path,
            queue="pubsub",
            max_attempts=20,
            pubsub=PubSubSettings(project="p", max_delivery_attempts=20),
        )
    with pytest.raises(ValidationError, match="CLOUDTASKS_MAX_ATTEMPTS"):
        build(
            tmp_path,
            queue="cloudtasks",
            cloudtasks=CloudTasksSettings(project="p", location="l", max_attempts=3),
        )
    unlimited = CloudTasksSettings(project="p", location="l", max_attempts=-1)
    build(tmp_path, queue="cloudtasks", cloudtasks=unlimited)


def test_one_queue_name_cannot_have_two_kinds(tmp_path):
    """Both channels on REMINDERS_QUEUE_NAME but of different kinds: refused, names the queue."""
    with pytest.raises(ValidationError, match="'reminders' is given two kinds"):
        build(tmp_path, webhook_queue_kind="pubsub", pubsub=PubSubSettings(project="p"))


def test_per_channel_kinds_name_every_served_queue(tmp_path):
    """The queues /push serves are the channels' queue names, each with its kind."""
    settings = build(
        tmp_path,
        webhook_queue="hooks",
        webhook_queue_kind="pubsub",
        pubsub=PubSubSettings(project="p"),
    )
    assert settings.queue_kinds == {"reminders": "embedded", "hooks": "pubsub"}
    assert settings.queue_kinds_in_use == {"embedded", "pubsub"}
