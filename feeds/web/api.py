"""CRUD for feed configuration. Feed data endpoints live in feeds/web/data_api.py."""

from rest_framework import viewsets

from core.openapi import document_viewset
from feeds.models import Feed
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
