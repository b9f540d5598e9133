"""Admin for the metering tree: the same checks as the API (energy/validation.py)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from energy.models import (
    EnergySite,
    ExpectedUse,
    FuelRate,
    GridCarbonPeriod,
    Meter,
    MeterNode,
    ReportRecipient,
    VirtualTerm,
)
from energy.validation import check_expected_overlap, check_fuel_change, check_terms


class TermFormSet(forms.BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        terms = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or data.get("source") is None:
                continue
            terms.append((data["source"], data.get("sign", 1)))
        try:
            check_fuel_change(self.instance)
            check_terms(self.instance, terms)
        except ValidationError as exc:
            messages = [m for ms in exc.message_dict.values() for m in ms]
            raise ValidationError(" ".join(messages)) from None


class VirtualTermInline(admin.TabularInline):
    model = VirtualTerm
    fk_name = "meter"
    formset = TermFormSet
    extra = 1
    autocomplete_fields = ["source"]


@admin.register(Meter)
class MeterAdmin(admin.ModelAdmin):
    list_display = ["name", "node", "fuel", "source", "feed", "counts_to_node", "generator"]
    list_filter = ["fuel", "source", "generator", "node__site"]
    search_fields = ["name", "node__name"]
    inlines = [VirtualTermInline]


class MeterInline(admin.TabularInline):
    model = Meter
    extra = 0
    fields = ["name", "fuel", "source", "feed", "counts_to_node", "separable_use"]
    show_change_link = True


@admin.register(MeterNode)
class MeterNodeAdmin(admin.ModelAdmin):
    list_display = ["name", "site", "parent", "kind", "floor_area_m2", "tm46_category"]
    list_filter = ["site", "kind"]
    search_fields = ["name"]
    inlines = [MeterInline]


class ExpectedUseForm(forms.ModelForm):
    class Meta:
        model = ExpectedUse
        fields = "__all__"

    def clean(self):
        data = super().clean()
        if not self.errors:
            check_expected_overlap(self.instance)
        return data


@admin.register(ExpectedUse)
class ExpectedUseAdmin(admin.ModelAdmin):
    form = ExpectedUseForm
    list_display = ["node", "fuel", "start", "end", "value"]
    list_filter = ["fuel", "node__site"]


@admin.register(FuelRate)
class FuelRateAdmin(admin.ModelAdmin):
    list_display = ["site", "fuel", "price_per_unit", "kg_co2e_per_unit"]


@admin.register(EnergySite)
class EnergySiteAdmin(admin.ModelAdmin):
    list_display = [
        "site",
        "outside_temperature_feed",
        "grid_carbon_feed",
        "hdd_base_c",
        "currency",
    ]


@admin.register(GridCarbonPeriod)
class GridCarbonPeriodAdmin(admin.ModelAdmin):
    list_display = ["site", "start", "end", "g_per_kwh"]
    list_filter = ["site"]


@admin.register(ReportRecipient)
class ReportRecipientAdmin(admin.ModelAdmin):
    list_display = ["email", "site", "node"]
    list_filter = ["site"]
    search_fields = ["email"]
