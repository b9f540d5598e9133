"""Multiple-choice fields that refuse an id the database cannot hold, before the query.

Django's ModelMultipleChoiceField looks the ticked ids up with `pk__in=[...]`; an id beyond a
64-bit signed integer (9223372036854775808) reaches the driver, which raises OverflowError
(SQLite) or an out-of-range error (PostgreSQL): a 500 instead of "Select a valid choice".
A single ModelChoiceField is safe (Django's exact lookup turns an out-of-range value into no
match), and so is DRF's PrimaryKeyRelatedField; the `__in` lookup is not.

Used by every staff form with a multiple choice (`BoundedModelMultipleChoiceField`, or
`bounded_formfield` as a ModelForm's formfield_callback) and by every admin with a
many-to-many field (`BoundedIdsAdmin`; tests/staff/test_out_of_range_ids.py checks each
registered admin uses it).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models

# The widest integer column Django makes (BigAutoField / bigint), on every backend we run.
ID_MIN, ID_MAX = -(2**63), 2**63 - 1


def _out_of_range(value: Any) -> bool:
    try:
        number = int(str(value).strip())
    except ValueError:
        return False  # not a number at all: Django's own check says "not a valid value"
    return not ID_MIN <= number <= ID_MAX


class BoundedModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """ModelMultipleChoiceField whose integer ids are checked against the 64-bit range first."""

    def _check_values(self, value: Any) -> Any:
        key = self.to_field_name or "pk"
        field = self.queryset.model._meta.pk if key == "pk" else None
        if field is None:
            field = self.queryset.model._meta.get_field(key)
        if isinstance(field, models.IntegerField):
            for pk in value:
                if _out_of_range(pk):
                    raise ValidationError(
                        self.error_messages["invalid_choice"],
                        code="invalid_choice",
                        params={"value": str(pk)[:40]},
                    )
        return super()._check_values(value)


def bounded_formfield(db_field: models.Field, **kwargs: Any) -> forms.Field | None:
    """A ModelForm formfield_callback: many-to-many fields become bounded choices."""
    if isinstance(db_field, models.ManyToManyField):
        kwargs.setdefault("form_class", BoundedModelMultipleChoiceField)
    return db_field.formfield(**kwargs)


class BoundedIdsAdmin:
    """Mixin for a ModelAdmin or inline: its many-to-many fields refuse out-of-range ids."""

    def formfield_for_manytomany(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("form_class", BoundedModelMultipleChoiceField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]
