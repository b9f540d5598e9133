from rest_framework import serializers

from alarms.models import Alarm


class AlarmSerializer(serializers.ModelSerializer):
    class Meta:
        model = Alarm
        fields = ["id", "key", "severity", "source", "message", "occurrences", "raised_at",
                  "cleared_at", "acknowledged_at", "acknowledged_by"]  # fmt: skip
        read_only_fields = fields
