"""The push route's short path (app/api/push_path.py) answers exactly what the router did.

Pushes skip FastAPI's router and its per-request layers; everything that is not
``POST /push/<one segment>`` must still reach the router and get its answers.
"""

import pytest

from app.api.push import push
from app.api.push_path import is_push
from tests.support.flow import push as push_signed
from tests.support.push import envelope


def _scope(method: str, path: str, root_path: str = "") -> dict:
    return {"type": "http", "method": method, "path": path, "root_path": root_path}


@pytest.mark.parametrize(
    ("method", "path", "root_path", "expected"),
    [
        ("POST", "/push/reminders", "", True),
        ("POST", "/push/a.b-c_d", "", True),
        ("GET", "/push/reminders", "", False),  # the router's 405
        ("POST", "/push/", "", False),  # no queue: the router's 404
        ("POST", "/push/reminders/", "", False),  # a trailing slash: the router's redirect
        ("POST", "/push/a/b", "", False),
        ("POST", "/pushy/a", "", False),
        ("POST", "/push/reminders", "/relay", False),  # a root path: the router strips it
    ],
)
def test_only_what_the_push_route_matches_takes_the_short_path(method, path, root_path, expected):
    """The same requests the route ``/push/{queue}`` (POST) matches, no others."""
    assert is_push(_scope(method, path, root_path)) is expected


async def test_pushes_leave_what_the_router_left_in_the_scope(client, monkeypatch):
    """Route, endpoint and path parameters are in the scope, as the router puts them."""
    seen: list[dict] = []

    async def recording(request):
        response = await push(request)
        seen.append(dict(request.scope))
        return response

    monkeypatch.setattr("app.api.push_path.push", recording)
    response = await push_signed(client, envelope("r-none"), queue="reminders")
    assert response.status_code == 200
    [scope] = seen
    assert scope["route"].path == "/push/{queue}"
    assert scope["path_params"] == {"queue": "reminders"}
    assert scope["endpoint"] is recording  # the route's endpoint (patched here)


async def test_requests_beside_the_push_route_get_the_routers_answers(client):
    """405 for another method, 404 for more segments, 404 for an unknown queue."""
    wrong_method = await client.get("/push/reminders")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"] == "method_not_allowed"
    deeper = await client.post("/push/reminders/extra", content=b"{}")
    assert deeper.status_code == 404
    unknown = await client.post("/push/no-such-queue", content=b"{}")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "not_found", "message": "no such queue"}
    assert len(unknown.headers["x-request-id"]) == 32  # the request-log middleware ran
