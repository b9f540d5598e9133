from rest_framework import serializers

from findings.models import Finding, StateRefused

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
        # The model says which marks a finding takes in which state (Finding.refusal).
        refused = self.instance.refusal(value) if self.instance is not None else None
        if refused:
            raise serializers.ValidationError(refused)
        return value

    def update(self, instance: Finding, validated_data: dict) -> Finding:
        try:
            instance.mark(validated_data["state"], self.context["request"].user)
        except StateRefused as exc:  # another person's mark landed between validate and here
            raise serializers.ValidationError({"state": [str(exc)]}) from exc
        return instance
