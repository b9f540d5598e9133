from rest_framework import serializers

from bms.serializers import ModelCleanSerializer
from feeds.models import Feed


class FeedSerializer(ModelCleanSerializer):
    class Meta:
        model = Feed
        fields = ["id", "name", "tag", "unit", "interval", "public", "description", "created"]
        read_only_fields = ["created"]

    def validate_interval(self, value: int) -> int:
        # The interval is baked into the data file: changing it would reinterpret every slot.
        if self.instance is not None and value != self.instance.interval:
            raise serializers.ValidationError("The interval of an existing feed cannot be changed.")
        return value
