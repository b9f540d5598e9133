"""Who may do what on the emoncms paths added for emoncms's clients (feeds/web/emoncms_feed_views.py,
sensors/emoncms_inputs.py), and the shape of their refusals.

emoncms has two keys per account (Modules/user/user_model.php `apikey_session`): the read key
reads, the write key reads and writes. Here a key is a staff API token (given as `apikey=` or
`Authorization: Bearer`, as emoncms clients send it) or a logged-in session, and what it may
do is its user's role: any staff role reads (emoncms's read key), engineers and superusers
also write (emoncms's write key). A node's or gateway's key is a device key: like emoncms's
devicekey it may only post readings, so on these paths it is refused as not a staff token.

Refusals keep emoncms's `{"success": false, "message": ...}` shape, with our `error` (and
`fields` naming a bad parameter) beside it, and a 4xx status where emoncms would answer 200.
"""

from __future__ import annotations

from rest_framework.exceptions import NotAuthenticated, NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from core.permissions import has_staff_role, is_engineer
from feeds.models import Feed
from feeds.web import query
from feeds.web.views import EmoncmsView

NO_KEY = "Authentication required: give an API key as apikey= or Authorization: Bearer"
READ_ONLY = "This key may only read: writing needs an engineer's API token (emoncms's write key)"
NO_ROLE = "This key's user has no staff role, so it may not read here"


class EmoncmsApiView(EmoncmsView):
    """An emoncms path whose every error answers in emoncms's shape."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        data = response.data if isinstance(response.data, dict) else {}
        detail = getattr(exc, "detail", None)
        # A plain refusal's own words (not "detail: ..."); a bad parameter's names it.
        message = str(detail) if isinstance(detail, str) else data.get("error") or str(exc)
        body = {"success": False, "message": message, "error": message}
        if "fields" in data:
            body["fields"] = data["fields"]
        response.data = body
        return response


def emoncms_error(message: str, status: int = 400, field: str | None = None) -> Response:
    body: dict = {"success": False, "message": message, "error": message}
    if field:
        body["fields"] = {field: [message]}
    return Response(body, status=status)


def require_read(request: Request) -> None:
    """emoncms's `$session['read']`: any staff role."""
    if has_staff_role(request.user):
        return
    if not (request.user and request.user.is_authenticated):
        raise NotAuthenticated(NO_KEY)
    raise PermissionDenied(NO_ROLE)


def require_write(request: Request) -> None:
    """emoncms's `$session['write']`: engineers and superusers."""
    require_read(request)
    if not is_engineer(request.user):
        raise PermissionDenied(READ_ONLY)


def readable_feed(request: Request, raw_id: str | None) -> Feed:
    """The feed `id=` names if this caller may read it (public, or staff), else the 401/403
    that hides whether it exists, or emoncms's "Feed does not exist" for staff."""
    feed_id = query.parse_id(raw_id)
    try:
        return query.readable_feeds(request.user, [feed_id])[feed_id]
    except NotFound:
        raise NotFound("Feed does not exist") from None
