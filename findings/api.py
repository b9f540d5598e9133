"""Findings over the API: read, ranked by cost; engineers set the state (who and when kept).
The site's Brick model as Turtle for staff (docs/BRICK.md)."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.views import APIView

from core.openapi import STAFF_READ, document_viewset
from energy.api import SiteIdOrSlugField
from findings import brick
from findings.models import Finding
from findings.serializers import FindingSerializer


@document_viewset(
    "findings",
    "finding",
    "findings",
    list={"description": "Most costly first. `?open=1`: only those not closed."},
)
class FindingViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    queryset = Finding.objects.select_related("state_by")
    serializer_class = FindingSerializer
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self):
        queryset = super().get_queryset()
        raw = self.request.query_params.get("open")
        if raw is None:
            return queryset
        if raw not in ("0", "1"):
            raise ValidationError({"open": ["'open' is 0 or 1"]})
        return queryset.filter(closed_at__isnull=raw == "1")

    def update(self, request, *args, **kwargs):
        # The body may be any JSON (null, a number, a list): only an object can name a state.
        if not isinstance(request.data, dict) or "state" not in request.data:
            raise ValidationError({"state": ["give the new state"]})
        return super().update(request, *args, **kwargs)


class BrickModelView(APIView):
    """GET ?site=<id or slug>: the site's Brick model as Turtle; without `site`, every site."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "site", OpenApiTypes.STR, description="the site's numeric id or its slug"
            )
        ],
        responses={(200, "text/turtle"): OpenApiResponse(OpenApiTypes.STR)},
        tags=["findings"],
        summary="Brick model (Turtle)",
        description="Every site, building, zone, plant, meter, sensor and actuator with its "
        "Brick 1.3 class, how they relate, and the feed of each recorded point. " + STAFF_READ,
    )
    def get(self, request):
        raw = request.query_params.get("site")
        site = None
        if raw is not None:
            try:
                site = SiteIdOrSlugField().to_internal_value(raw)
            except ValidationError as exc:
                raise ValidationError({"site": exc.detail}) from None
        name = site.slug if site is not None else "sites"
        response = HttpResponse(brick.export(site), content_type="text/turtle; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.ttl"'
        return response
