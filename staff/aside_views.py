"""Requests set aside by the ingest drain (sensors/ingest/set_aside.py): a page listing them,
newest first and paged, with "retry" (back onto the node's stream) and "discard" (after a
confirmation page). Every staff role sees the list, as the inputs page it hangs from; only
engineers retry or discard (is_engineer, as the process-list editor), and each is kept in the
node's admin history with who did it.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.api_errors import error_response
from core.pages import staff_page
from core.permissions import is_engineer
from core.redis import REDIS_FAILURES
from sensors.ingest import aside_review
from sensors.models import Node

ONLY_ENGINEERS = "Only engineers may retry or discard a request set aside."


def page_number(raw: str | None) -> int | str:
    """The `page` asked for, or the error naming it (1 to aside_review.MAX_PAGE)."""
    if raw is None or raw == "":
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= aside_review.MAX_PAGE:
        return f"'page' is a whole number from 1 to {aside_review.MAX_PAGE}"
    return int(raw)


def node_names(items: list[aside_review.Aside]) -> dict[int, str]:
    ids = {a.node_id for a in items}
    return dict(Node.objects.filter(pk__in=ids).values_list("pk", "name"))


@staff_page
def aside_list(request: HttpRequest) -> HttpResponse:
    number = page_number(request.GET.get("page"))
    if isinstance(number, str):
        return error_response(number, 400, field="page")
    shown = aside_review.page(number)
    names = node_names(shown.items)
    return render(
        request,
        "staff/set_aside.html",
        {
            "nav": "inputs",
            "page": shown,
            "rows": [(a, names.get(a.node_id)) for a in shown.items],
            "can_act": is_engineer(request.user),
        },
    )


def _checked(request: HttpRequest, node_pk: int, entry: str) -> Node | HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    if not aside_review.valid_entry(entry):
        return error_response("'entry' is a stream id such as 1700000000000-0", 400, field="entry")
    return get_object_or_404(Node, pk=node_pk)


def _audit(request: HttpRequest, node: Node, text: str) -> None:
    LogEntry.objects.log_actions(request.user.pk, [node], CHANGE, change_message=text)


def _what(aside: aside_review.Aside) -> str:
    return f"request {aside.entry} set aside ({len(aside.rows)} rows, error: {aside.error[:120]})"


@require_POST
@staff_page
def aside_retry(request: HttpRequest, node_pk: int, entry: str) -> HttpResponse:
    node = _checked(request, node_pk, entry)
    if isinstance(node, HttpResponse):
        return node
    try:
        aside = aside_review.retry(node.pk, entry)
    except aside_review.NotFound:
        messages.error(request, f"Request {entry} is no longer set aside (retried or discarded).")
        return redirect("staff-set-aside")
    except REDIS_FAILURES as exc:
        messages.error(request, f"Redis did not take it back ({exc}); it is still set aside.")
        return redirect("staff-set-aside")
    _audit(request, node, f"Retried {_what(aside)}: back onto its stream (staff page).")
    messages.success(request, f"Retried: {len(aside.rows)} rows of '{node.name}' are queued again.")
    return redirect("staff-set-aside")


@staff_page
def aside_discard(request: HttpRequest, node_pk: int, entry: str) -> HttpResponse:
    """GET: the confirmation page; POST with confirm=yes: discarded for good."""
    node = _checked(request, node_pk, entry)
    if isinstance(node, HttpResponse):
        return node
    if request.method != "POST":
        found = aside_review.one(node.pk, entry)
        if not found:
            messages.error(request, f"Request {entry} is no longer set aside.")
            return redirect("staff-set-aside")
        return render(
            request,
            "staff/set_aside_discard.html",
            {"nav": "inputs", "aside": found[0], "node": node},
        )
    if request.POST.get("confirm") != "yes":
        return error_response("'confirm' must be 'yes' to discard for good", 400, field="confirm")
    try:
        aside = aside_review.discard(node.pk, entry)
    except aside_review.NotFound:
        messages.error(request, f"Request {entry} is no longer set aside (retried or discarded).")
        return redirect("staff-set-aside")
    _audit(request, node, f"Discarded {_what(aside)} (staff page).")
    messages.success(request, f"Discarded: {len(aside.rows)} rows of '{node.name}'.")
    return redirect("staff-set-aside")
