from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.serializers import ModelCleanSerializer
from displays.models import Display, Panel
from displays.warnings import private_feed_warnings

WARNINGS_FIELD = serializers.ListField(
    child=serializers.CharField(),
    help_text="Why this may not show as expected, e.g. a public display using feeds that are "
    "not public (they show 'Feed not public' without a login). Saved anyway.",
)


class PanelSerializer(ModelCleanSerializer):
    warnings = serializers.SerializerMethodField()

    class Meta:
        model = Panel
        fields = [
            "id", "display", "kind", "feeds", "label", "unit", "colour", "order", "options",
            "warnings",
        ]  # fmt: skip

    @extend_schema_field(WARNINGS_FIELD)
    def get_warnings(self, panel: Panel) -> list[str]:
        return private_feed_warnings(panel.display, [panel])


class DisplaySerializer(ModelCleanSerializer):
    panels = PanelSerializer(many=True, read_only=True)
    warnings = serializers.SerializerMethodField()

    class Meta:
        model = Display
        fields = [
            "id",
            "site",
            "slug",
            "title",
            "theme",
            "refresh_s",
            "rotate_s",
            "public",
            "panels",
            "warnings",
        ]

    @extend_schema_field(WARNINGS_FIELD)
    def get_warnings(self, display: Display) -> list[str]:
        return private_feed_warnings(display)
