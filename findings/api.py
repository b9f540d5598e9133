"""Findings over the API: read, ranked by cost; engineers set the state (who and when kept)."""

from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError

from core.openapi import document_viewset
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
            raise ValidationError({"open": "'open' is 0 or 1"})
        return queryset.filter(closed_at__isnull=raw == "1")

    def update(self, request, *args, **kwargs):
        # The body may be any JSON (null, a number, a list): only an object can name a state.
        if not isinstance(request.data, dict) or "state" not in request.data:
            raise ValidationError({"state": "give the new state"})
        return super().update(request, *args, **kwargs)
