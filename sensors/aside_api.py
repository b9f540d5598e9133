"""The API of the requests set aside (sensors/ingest/aside_review.py), as the staff page
(staff/aside_views.py): list (any staff role), retry and discard (engineers, audited)."""

from __future__ import annotations

from django.contrib.admin.models import CHANGE, LogEntry
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.openapi import ENGINEERS_WRITE, STAFF_READ
from core.redis import REDIS_FAILURES
from sensors.ingest import aside_review
from sensors.models import Node


class RedisAway(APIException):
    status_code = 503
    default_detail = "Redis did not take the request back; it is still set aside."


def _json(aside: aside_review.Aside, names: dict[int, str]) -> dict:
    return {
        "node": aside.node_id,
        "node_name": names.get(aside.node_id),
        "entry": aside.entry,
        "at": int(aside.at.timestamp()),
        "error": aside.error,
        "rows": len(aside.rows),
        "values": aside.values,
        "requests": aside.requests,
    }


class SetAsideList(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("page", int, description="1 to 1000; 20 a page")],
        responses=OpenApiTypes.OBJECT,
        tags=["nodes"],
        summary="Requests set aside by the ingest worker",
        description="Requests that failed the same way 3 times running, newest first "
        "(docs/INGEST.md): node, when, the error, rows and values; `count` in all. " + STAFF_READ,
    )
    def get(self, request):
        raw = request.query_params.get("page", "")
        if raw and (not raw.isdigit() or not 1 <= int(raw) <= aside_review.MAX_PAGE):
            raise ValidationError({"page": [f"a whole number from 1 to {aside_review.MAX_PAGE}"]})
        page = aside_review.page(int(raw or 1))
        ids = {a.node_id for a in page.items}
        names = dict(Node.objects.filter(pk__in=ids).values_list("pk", "name"))
        return Response(
            {
                "count": page.total,
                "page": page.number,
                "pages": page.pages,
                "results": [_json(a, names) for a in page.items],
            }
        )


class _Act(APIView):
    def _node(self, node_pk: int, entry: str) -> Node:
        if not aside_review.valid_entry(entry):
            raise ValidationError({"entry": ["a stream id such as 1700000000000-0"]})
        return get_object_or_404(Node, pk=node_pk)

    def _done(self, request, node: Node, aside: aside_review.Aside, did: str) -> Response:
        LogEntry.objects.log_actions(
            request.user.pk,
            [node],
            CHANGE,
            change_message=f"{did} request {aside.entry} set aside ({len(aside.rows)} rows, "
            f"error: {aside.error[:120]}) (API).",
        )
        return Response(_json(aside, {node.pk: node.name}))


class SetAsideRetry(_Act):
    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        tags=["nodes"],
        summary="Retry a request set aside",
        description="Back onto its node's stream, after its newer posts; 404 if it is no longer "
        "set aside. Kept in the node's admin history. " + ENGINEERS_WRITE,
    )
    def post(self, request, node_pk: int, entry: str):
        node = self._node(node_pk, entry)
        try:
            aside = aside_review.retry(node.pk, entry)
        except aside_review.NotFound as exc:
            raise NotFound(str(exc)) from exc
        except REDIS_FAILURES as exc:
            raise RedisAway() from exc
        return self._done(request, node, aside, "Retried")


class SetAsideDiscard(_Act):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
        tags=["nodes"],
        summary="Discard a request set aside",
        description='Gone for good: the body must say `{"confirm": true}`; 404 if it is no '
        "longer set aside. Kept in the node's admin history. " + ENGINEERS_WRITE,
    )
    def post(self, request, node_pk: int, entry: str):
        node = self._node(node_pk, entry)
        body = request.data if isinstance(request.data, dict) else {}
        if body.get("confirm") is not True:
            raise ValidationError({"confirm": ["must be true to discard for good"]})
        try:
            aside = aside_review.discard(node.pk, entry)
        except aside_review.NotFound as exc:
            raise NotFound(str(exc)) from exc
        return self._done(request, node, aside, "Discarded")
