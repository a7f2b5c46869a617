"""The rules a customer's record keeps across PUTs (``app.services.customers``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.errors import InvalidInput
from app.services.customers import CustomerChange, customer_values

NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(days=3)
HOOK = "https://hooks.example.com/reminders"


def stored(**overrides: object) -> dict[str, object]:
    """A customer row as the repository returns it, with a webhook disabled by a 410."""
    return {
        "webhook_url": HOOK,
        "webhook_disabled_at": EARLIER,
        "unsubscribed_at": None,
        **overrides,
    }


def test_a_webhook_disabled_by_410_stays_disabled_when_the_url_is_unchanged():
    """Re-sending the same URL does not re-enable an endpoint that answered 410 Gone."""
    values = customer_values(CustomerChange(webhook_url=HOOK), stored(), now=NOW)
    assert values["webhook_disabled_at"] == EARLIER


def test_a_new_webhook_url_clears_the_disable_mark():
    """A different URL is a new endpoint: webhook sends resume."""
    values = customer_values(CustomerChange(webhook_url=HOOK + "/v2"), stored(), now=NOW)
    assert values["webhook_disabled_at"] is None


def test_removing_the_webhook_url_clears_the_disable_mark():
    """No URL, nothing to keep disabled; a URL set later starts fresh."""
    values = customer_values(CustomerChange(webhook_url=None), stored(), now=NOW)
    assert values["webhook_disabled_at"] is None


def test_a_new_customer_starts_enabled_and_subscribed_as_asked():
    """With no previous row there is no disable mark; unsubscribing stamps now."""
    values = customer_values(CustomerChange(webhook_url=HOOK, unsubscribed=True), None, now=NOW)
    assert values["webhook_disabled_at"] is None
    assert values["unsubscribed_at"] == NOW


def test_unsubscribing_again_keeps_the_first_time_and_resubscribing_clears_it():
    """unsubscribed_at records when the customer first left, not the latest PUT."""
    previous = stored(unsubscribed_at=EARLIER)
    assert (
        customer_values(CustomerChange(unsubscribed=True), previous, now=NOW)["unsubscribed_at"]
        == EARLIER
    )
    assert (
        customer_values(CustomerChange(unsubscribed=False), previous, now=NOW)["unsubscribed_at"]
        is None
    )


def test_opted_out_channels_are_stored_once_each_in_order():
    """Repeated channels collapse; the stored list is sorted."""
    change = CustomerChange(opted_out_channels=["webhook", "email", "webhook"])
    assert customer_values(change, None, now=NOW)["opted_out_channels"] == ["email", "webhook"]


@pytest.mark.parametrize(
    ("start", "end"),
    [("22:00", None), (None, "07:00"), ("22:00", "22:00")],
    ids=["start only", "end only", "empty window"],
)
def test_quiet_hours_come_as_a_pair_of_different_times(start, end):
    """Half a window, or one that starts where it ends, is refused on quiet_hours_end."""
    change = CustomerChange(quiet_hours_start=start, quiet_hours_end=end)
    with pytest.raises(InvalidInput) as refused:
        customer_values(change, None, now=NOW)
    assert refused.value.field == "quiet_hours_end"


def test_a_full_quiet_hours_window_is_stored():
    """Both ends given and different: stored as given (a window may wrap midnight)."""
    change = CustomerChange(quiet_hours_start="22:00", quiet_hours_end="07:00")
    values = customer_values(change, None, now=NOW)
    assert (values["quiet_hours_start"], values["quiet_hours_end"]) == ("22:00", "07:00")
