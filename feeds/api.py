"""CRUD for feed configuration. Feed data endpoints live in feeds/data_api.py."""

from rest_framework import viewsets

from feeds.models import Feed
from feeds.serializers import FeedSerializer


class FeedViewSet(viewsets.ModelViewSet):
    queryset = Feed.objects.all()
    serializer_class = FeedSerializer
