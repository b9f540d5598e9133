"""Serializer base: run the model's own clean() so API and admin refuse the same things."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers


class ModelCleanSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose validate() calls Model.clean() on an unsaved copy.

    Without this a booking ending before it starts would be refused in the admin but
    stored through the API.
    """

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        model = self.Meta.model
        many_to_many = {f.name for f in model._meta.many_to_many}
        if self.instance is not None:
            candidate = model(
                **{
                    f.attname: getattr(self.instance, f.attname)
                    for f in model._meta.concrete_fields
                }
            )
        else:
            candidate = model()
        for name, value in attrs.items():
            if name not in many_to_many:
                setattr(candidate, name, value)
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            if hasattr(exc, "error_dict"):
                raise serializers.ValidationError(exc.message_dict) from exc
            raise serializers.ValidationError({"non_field_errors": exc.messages}) from exc
        return attrs
