"""One placeholder list for every secret: what a token refuses, the Infrai key refuses too."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from app.adapters.queues.infrai.settings import InfraiSettings
from app.settings.secrets import PLACEHOLDER_SECRETS, is_placeholder
from tests.conftest import make_settings


def settings(tmp_path, **values):
    return make_settings("sqlite+aiosqlite:///unused.db", tmp_path, **values)


def test_password_as_the_infrai_key_is_refused_outside_dev_mode(tmp_path):
    """The key "password" is refused: it was refused as a token but accepted as this key."""
    with pytest.raises(ValueError, match="REMINDERS_INFRAI_API_KEY is empty or a placeholder"):
        settings(tmp_path, queue="infrai", infrai=InfraiSettings(api_key=SecretStr("password")))


def test_dev_mode_accepts_a_placeholder_infrai_key(tmp_path):
    """Dev mode runs against a local Infrai stand-in with whatever key it was given."""
    built = settings(
        tmp_path,
        dev_mode=True,
        queue="infrai",
        infrai=InfraiSettings(api_key=SecretStr("password")),
    )
    assert built.infrai.api_key.get_secret_value() == "password"


@pytest.mark.parametrize("value", sorted(PLACEHOLDER_SECRETS))
def test_every_placeholder_is_refused_as_a_token_and_as_the_infrai_key(tmp_path, value):
    """Each listed value, in any case and with spaces around it, is refused for both."""
    shouted = f"  {value.upper()} "
    assert is_placeholder(SecretStr(shouted))
    with pytest.raises(ValueError, match="REMINDERS_API_TOKEN"):
        settings(tmp_path, api_token=SecretStr(shouted))
    with pytest.raises(ValueError, match="REMINDERS_INFRAI_API_KEY"):
        settings(tmp_path, queue="infrai", infrai=InfraiSettings(api_key=SecretStr(shouted)))
