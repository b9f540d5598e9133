from rest_framework import serializers

from core.serializers import ModelCleanSerializer
from feeds.models import Feed
from feeds.save_warnings import feed_warnings


class FeedSerializer(ModelCleanSerializer):
    warnings = serializers.SerializerMethodField()

    class Meta:
        model = Feed
        fields = [
            "id", "name", "tag", "unit", "interval", "public", "description", "bacnet_export",
            "created",
            "warnings",
        ]  # fmt: skip
        read_only_fields = ["created"]

    def get_warnings(self, feed: Feed) -> list[str]:
        """What other apps say of this feed as saved, e.g. a public display showing it while
        it is private (feeds/save_warnings.py)."""
        return feed_warnings(feed)

    def validate_interval(self, value: int) -> int:
        # The interval is baked into the data file: changing it would reinterpret every slot.
        if self.instance is not None and value != self.instance.interval:
            raise serializers.ValidationError("The interval of an existing feed cannot be changed.")
        return value
