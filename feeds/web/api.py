"""CRUD for feed configuration. Feed data endpoints live in feeds/web/data_api.py."""

from rest_framework import viewsets

from core.openapi import document_viewset
from feeds import save_audit
from feeds.models import Feed, choosing
from feeds.web.serializers import FeedSerializer


@document_viewset(
    "feeds",
    "feed",
    "feeds",
    about="Feed configuration; data: /api/v1/feeds/<id>/data and the emoncms /feed/*.json.",
)
class FeedViewSet(viewsets.ModelViewSet):
    queryset = Feed.objects.all()
    serializer_class = FeedSerializer

    # Checked and saved one change at a time (feeds.models.choosing: the BACnet bound counts).
    def create(self, request, *args, **kwargs):
        with choosing():
            return super().create(request, *args, **kwargs)

    def update(self, request, *args, **kwargs):
        with choosing():
            return super().update(request, *args, **kwargs)

    # Apps above feeds keep who changed what (feeds/save_audit.py): control, a feed shown on
    # the site's BACnet device.
    def perform_create(self, serializer) -> None:
        save_audit.audited_save(self.request.user, None, serializer.save, save_audit.API)

    def perform_update(self, serializer) -> None:
        save_audit.audited_save(
            self.request.user, serializer.instance, serializer.save, save_audit.API
        )
