from bms.serializers import ModelCleanSerializer
from displays.models import Display, Panel


class PanelSerializer(ModelCleanSerializer):
    class Meta:
        model = Panel
        fields = ["id", "display", "kind", "feeds", "label", "unit", "colour", "order", "options"]


class DisplaySerializer(ModelCleanSerializer):
    panels = PanelSerializer(many=True, read_only=True)

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
        ]
