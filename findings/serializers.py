from rest_framework import serializers

from findings.models import Finding

READ_FIELDS = ["id", "rule", "subject", "subject_url", "period_start", "period_end", "last_seen",
               "detail", "evidence", "waste_kwh_week", "waste_money_week", "waste_kg_co2_week",
               "currency", "cost_method", "what_to_check", "state", "state_by", "state_at",
               "closed_at", "created"]  # fmt: skip


class FindingSerializer(serializers.ModelSerializer):
    class Meta:
        model = Finding
        fields = READ_FIELDS
        read_only_fields = [f for f in READ_FIELDS if f != "state"]

    def validate_state(self, value: str) -> str:
        if value == Finding.State.NEW:
            raise serializers.ValidationError(
                "a finding is marked acknowledged, fixed or false_alarm"
            )
        return value

    def update(self, instance: Finding, validated_data: dict) -> Finding:
        instance.mark(validated_data["state"], self.context["request"].user)
        return instance
