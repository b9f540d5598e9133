"""CRUD for kiosk displays and their panels (the public kiosk JSON is in displays/views.py)."""

from rest_framework import viewsets

from core.openapi import document_viewset
from displays.models import Display, Panel
from displays.serializers import DisplaySerializer, PanelSerializer


@document_viewset(
    "displays",
    "kiosk display",
    "kiosk displays",
    about="The public kiosk pages and their data are at /kiosk/<slug>/ (not part of this API).",
)
class DisplayViewSet(viewsets.ModelViewSet):
    queryset = Display.objects.prefetch_related("panels__feeds")
    serializer_class = DisplaySerializer


@document_viewset("displays", "display panel", "display panels")
class PanelViewSet(viewsets.ModelViewSet):
    queryset = Panel.objects.prefetch_related("feeds")
    serializer_class = PanelSerializer
