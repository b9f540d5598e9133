"""DRF serializers: the models' own clean() and the virtual-meter checks give the 400s."""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from rest_framework import serializers

from energy import benchmarks
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


def _drf(exc: DjangoValidationError) -> serializers.ValidationError:
    return serializers.ValidationError(
        exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
    )


class NoUnknownFields:
    """Refuse a field the serializer does not have instead of dropping it silently (a
    recipient posted with `building` became site-wide)."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"unknown field: use {', '.join(self.fields)}"] for name in unknown}
                )
        return super().to_internal_value(data)


class CleanedSerializer(serializers.ModelSerializer):
    """Runs Model.clean() on the would-be instance, so admin and API refuse the same things."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        instance = self.Meta.model(
            **{**(self._current() if self.instance else {}), **self._plain(attrs)}
        )
        if self.instance is not None:
            instance.pk = self.instance.pk
        try:
            instance.clean()
            self.extra_checks(instance)
        except DjangoValidationError as exc:
            raise _drf(exc) from None
        return attrs

    def _plain(self, attrs):
        return {k: v for k, v in attrs.items() if k in self._concrete()}

    def _concrete(self):
        return {f.name for f in self.Meta.model._meta.concrete_fields}

    def _current(self):
        return {f: getattr(self.instance, f) for f in self._concrete() if f != "id"}

    def extra_checks(self, instance) -> None:
        pass


class MeterNodeSerializer(CleanedSerializer):
    class Meta:
        model = MeterNode
        fields = [
            "id", "site", "parent", "name", "kind", "floor_area_m2", "tm46_category",
            "annual_occupancy_hours", "baseline_start", "baseline_end",
        ]  # fmt: skip


class TermSerializer(serializers.ModelSerializer):
    class Meta:
        model = VirtualTerm
        fields = ["source", "sign"]


class MeterSerializer(CleanedSerializer):
    terms = TermSerializer(many=True, required=False)
    # The unit follows from the fuel (kWh; water m³) and is not stored; given, it must agree,
    # so `"fuel": "water", "unit": "kWh"` is a 400 naming unit, not a meter silently in m³.
    unit = serializers.CharField(required=False, max_length=16)

    class Meta:
        model = Meter
        fields = [
            "id", "node", "name", "fuel", "unit", "source", "feed", "counts_to_node",
            "max_fill_hours", "separable_use", "generator", "flow_feed", "terms",
        ]  # fmt: skip

    def extra_checks(self, instance) -> None:
        check_fuel_change(instance)
        if self._validated_terms is None and self.instance is not None:
            terms = [(t.source, t.sign) for t in self.instance.terms.select_related("source")]
        else:
            terms = [(t["source"], t["sign"]) for t in self._validated_terms or []]
        check_terms(instance, terms)

    def validate(self, attrs):
        self._validated_terms = attrs.get("terms")  # None: not given
        unit = attrs.pop("unit", None)
        fuel = attrs.get("fuel") or (self.instance.fuel if self.instance else None)
        if unit is not None and fuel in benchmarks.UNIT:
            if not benchmarks.same_unit(unit, benchmarks.UNIT[fuel]):
                raise serializers.ValidationError(
                    {"unit": [f"{unit!r}: a {fuel} meter counts in {benchmarks.UNIT[fuel]} "
                              "(the unit follows from the fuel)"]}
                )  # fmt: skip
        return super().validate(attrs)

    def _write_terms(self, meter: Meter, terms) -> None:
        if terms is None:
            return
        meter.terms.all().delete()
        VirtualTerm.objects.bulk_create(
            [VirtualTerm(meter=meter, source=t["source"], sign=t["sign"]) for t in terms]
        )

    def create(self, validated_data):
        terms = validated_data.pop("terms", [])
        with transaction.atomic():
            meter = Meter.objects.create(**validated_data)
            self._write_terms(meter, terms)
        return meter

    def update(self, instance, validated_data):
        terms = validated_data.pop("terms", None)
        with transaction.atomic():
            for k, v in validated_data.items():
                setattr(instance, k, v)
            instance.save()
            if instance.source != Meter.Source.VIRTUAL:
                instance.terms.all().delete()
            else:
                self._write_terms(instance, terms)
        return instance


class ExpectedUseSerializer(NoUnknownFields, CleanedSerializer):
    class Meta:
        model = ExpectedUse
        fields = ["id", "node", "fuel", "start", "end", "value"]

    def extra_checks(self, instance) -> None:
        check_expected_overlap(instance)


class FuelRateSerializer(serializers.ModelSerializer):
    class Meta:
        model = FuelRate
        fields = ["id", "site", "fuel", "price_per_unit", "kg_co2e_per_unit"]


GRID_CARBON_UNITS = {"g/kwh", "gco2/kwh", "gco2e/kwh", "gco₂/kwh", "gco₂e/kwh"}


class EnergySiteSerializer(serializers.ModelSerializer):
    class Meta:
        model = EnergySite
        fields = [
            "id", "site", "outside_temperature_feed", "grid_carbon_feed", "hdd_base_c", "currency",
        ]  # fmt: skip

    def validate_grid_carbon_feed(self, feed):
        # its daily mean is read as g CO2e/kWh: a feed of W or °C would be taken as a factor
        if feed is not None and feed.unit.replace(" ", "").lower() not in GRID_CARBON_UNITS:
            raise serializers.ValidationError(
                f"'{feed}' has unit {feed.unit!r}: a grid carbon feed is in g/kWh "
                "(g CO2e per kWh); set the feed's unit"
            )
        return feed


class GridCarbonPeriodSerializer(CleanedSerializer):
    class Meta:
        model = GridCarbonPeriod
        fields = ["id", "site", "start", "end", "g_per_kwh"]


class ReportRecipientSerializer(NoUnknownFields, CleanedSerializer):
    class Meta:
        model = ReportRecipient
        fields = ["id", "site", "node", "email"]
        # clean() names a duplicate by its address; the table constraint stays the backstop
        validators: list = []


class LeagueDecSerializer(serializers.Serializer):
    """The schema of a league row's `dec` (energy/dec.py): documentation only."""

    benchmark_electricity = serializers.FloatField(
        help_text="TM46 electricity benchmark adjusted for this building, kWh/m² a year"
    )
    benchmark_fossil = serializers.FloatField(
        help_text="TM46 fossil-thermal benchmark adjusted for this building, kWh/m² a year"
    )
    hdd_year = serializers.FloatField(
        allow_null=True, help_text="heating degree days a year at 15.5 °C; null: not adjusted"
    )
    hdd_reference = serializers.FloatField(help_text="TM46's standard year: 2021")
    hdd_base_c = serializers.FloatField(help_text="15.5")
    weather_ratio = serializers.FloatField(allow_null=True, help_text="hdd_year / 2021")
    occupancy_hours = serializers.IntegerField(
        allow_null=True, help_text="the hours counted; null: standard hours or not adjusted"
    )
    hours_standard = serializers.IntegerField(allow_null=True)
    hours_max = serializers.IntegerField(allow_null=True)
    separable_kwh_year = serializers.DictField(
        child=serializers.FloatField(),
        help_text="kWh a year taken out, by `electricity` and `fossil`",
    )
    separable_uses = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(
        child=serializers.CharField(), help_text="what adjusted the benchmark, in words"
    )


class LeagueNoModelSerializer(serializers.Serializer):
    fuel = serializers.CharField()
    reason = serializers.CharField()


class LeagueRowSerializer(serializers.Serializer):
    """The schema of one building of the league (energy/report.py league): documentation."""

    node = serializers.IntegerField()
    name = serializers.CharField()
    floor_area_m2 = serializers.FloatField(allow_null=True)
    kwh = serializers.FloatField(allow_null=True, help_text="energy use over the range")
    kwh_per_m2 = serializers.FloatField(allow_null=True)
    kwh_per_m2_year = serializers.FloatField(
        allow_null=True, help_text="annualised on the days with data"
    )
    days = serializers.IntegerField()
    days_with_data = serializers.IntegerField()
    tm46_category = serializers.CharField(allow_null=True)
    tm46_typical_electricity = serializers.FloatField(allow_null=True)
    tm46_typical_fossil = serializers.FloatField(allow_null=True)
    operational_rating = serializers.FloatField(allow_null=True, help_text="100 = typical")
    dec_grade = serializers.CharField(allow_null=True, help_text="A to G")
    dec = LeagueDecSerializer(allow_null=True)
    actual_compared_kwh = serializers.FloatField(allow_null=True)
    expected_kwh = serializers.FloatField(allow_null=True)
    change_pct = serializers.FloatField(allow_null=True)
    compared_days = serializers.IntegerField()
    against_expected = serializers.CharField(
        allow_null=True, help_text="e.g. 'Used 288 kWh (£20) more than expected'"
    )
    percent = serializers.CharField(allow_null=True, help_text="e.g. '12.3 % over expected'")
    fuels = serializers.DictField(
        child=serializers.FloatField(), help_text="kWh of each energy fuel with data"
    )
    cost = serializers.FloatField(allow_null=True, help_text="in the site's currency")
    currency = serializers.CharField(help_text="the site's currency symbol")
    kg_co2e = serializers.FloatField(allow_null=True)
    expected_from = serializers.CharField(
        allow_null=True,
        help_text="'model for gas', 'baseline for electricity', 'fitted baseline for gas' or several (' + ')",
    )
    no_model = LeagueNoModelSerializer(
        many=True, help_text="fuels with neither a model nor a reliable baseline, and why"
    )
    gap_meter_days = serializers.IntegerField()
    warning = serializers.CharField(allow_null=True)


class LeagueSerializer(serializers.Serializer):
    site = serializers.IntegerField()
    first = serializers.DateField()
    last = serializers.DateField()
    buildings = LeagueRowSerializer(many=True)
