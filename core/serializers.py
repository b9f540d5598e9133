"""Serializer base: run the model's own clean() so API and admin refuse the same things."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.relations import MANY_RELATION_KWARGS


def api_error(exc: DjangoValidationError) -> serializers.ValidationError:
    """A model's ValidationError as the API's 400: per field, or `non_field_errors`."""
    if hasattr(exc, "error_dict"):
        return serializers.ValidationError(exc.message_dict)
    return serializers.ValidationError({"non_field_errors": exc.messages})


@contextmanager
def model_errors_as_api_errors() -> Iterator[None]:
    """Around a save that checks the model's rules again (a write path such as
    control/bookings.py): a refusal there is the API's 400, as one in validate() is."""
    try:
        yield
    except DjangoValidationError as exc:
        raise api_error(exc) from exc


# Every many-to-many list of ids an API serializer accepts is bounded by this unless the
# serializer declares its own: each id is one database lookup.
MAX_RELATED_IDS = 2000


class BoundedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A primary-key field whose `many=True` form holds at most MAX_RELATED_IDS ids."""

    @classmethod
    def many_init(cls, *args, **kwargs):
        list_kwargs = {"child_relation": cls(*args, **kwargs)}
        for key in kwargs:
            if key in MANY_RELATION_KWARGS:
                list_kwargs[key] = kwargs[key]
        return BoundedManyRelated(max_items=MAX_RELATED_IDS, **list_kwargs)


class ModelCleanSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose validate() calls Model.clean() on an unsaved copy.

    Without this a booking ending before it starts would be refused in the admin but
    stored through the API.
    """

    serializer_related_field = BoundedPrimaryKeyRelatedField

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
            candidate._state.adding = False  # the row itself is no clash with its constraints
        else:
            candidate = model()
        for name, value in attrs.items():
            if name not in many_to_many:
                setattr(candidate, name, value)
        try:
            candidate.clean()
            # The database's constraints too, conditional ones included (a node name unique
            # among nodes of no site): DRF's own validators know only plain unique_together,
            # and a violation found by the database is a 500.
            candidate.validate_constraints()
        except DjangoValidationError as exc:
            raise api_error(exc) from exc
        return attrs


class BoundedManyRelated(serializers.ManyRelatedField):
    """A many-to-many field of ids holding at most `max_items`: each id is looked up on its own,
    so a 1 MB body of ids was some 100,000 queries in one request."""

    def __init__(self, *args, max_items: int, **kwargs) -> None:
        self.max_items = max_items
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) and hasattr(data, "__len__") and len(data) > self.max_items:
            raise serializers.ValidationError(f"At most {self.max_items} items.")
        return super().to_internal_value(data)
