"""CRUD for kiosk displays and their panels (the public kiosk JSON is in displays/views.py)."""

from rest_framework import viewsets

from displays.models import Display, Panel
from displays.serializers import DisplaySerializer, PanelSerializer


class DisplayViewSet(viewsets.ModelViewSet):
    queryset = Display.objects.prefetch_related("panels__feeds")
    serializer_class = DisplaySerializer


class PanelViewSet(viewsets.ModelViewSet):
    queryset = Panel.objects.prefetch_related("feeds")
    serializer_class = PanelSerializer
