"""REST API under /api/v1/energy/ (docs/API.md, docs/ENERGY.md).

Staff roles read, engineers write (core.permissions.GroupPermission, the project default).
Figures: GET nodes/<id>/consumption, nodes/<id>/performance, league; model import: POST
expected/upload (CSV); recompute days from the feeds: POST refresh.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, timedelta

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.openapi import ENGINEERS_WRITE, STAFF_READ, document_viewset
from energy import benchmarks, consumption, model_csv, monthly, refresh, report, report_pdf
from energy.models import (
    EnergySite,
    ExpectedUse,
    FuelRate,
    GridCarbonPeriod,
    Meter,
    MeterNode,
    ReportRecipient,
)
from energy.serializers import (
    EnergySiteSerializer,
    ExpectedUseSerializer,
    FuelRateSerializer,
    GridCarbonPeriodSerializer,
    LeagueSerializer,
    MeterNodeSerializer,
    MeterSerializer,
    ReportRecipientSerializer,
)
from sensors.models import Site


def _bad(field: str, message: str) -> ValidationError:
    return ValidationError({field: [message]})


FIRST_DATE, LAST_DATE = consumption.FIRST_DATE, consumption.LAST_DATE
MONTH_PARAMETER = OpenApiParameter("month", OpenApiTypes.STR, required=True, description="YYYY-MM")


def _in_bounds(field: str, value: date) -> date:
    if not FIRST_DATE <= value <= LAST_DATE:
        raise _bad(field, f"{value.isoformat()} is outside {FIRST_DATE}..{LAST_DATE}")
    return value


def parse_range(params, default_days: int = 30) -> tuple[date, date]:
    """start/end (ISO dates, end inclusive, FIRST_DATE..LAST_DATE); at most
    report.MAX_RANGE_DAYS days."""
    try:
        last = date.fromisoformat(params["end"]) if params.get("end") else date.today()
    except (ValueError, TypeError):
        raise _bad("end", f"{params.get('end')!r} is not a date (YYYY-MM-DD)") from None
    _in_bounds("end", last)  # before start's default is counted back from it
    try:
        first = (
            date.fromisoformat(params["start"])
            if params.get("start")
            else last - timedelta(days=default_days - 1)
        )
    except (ValueError, TypeError):
        raise _bad("start", f"{params.get('start')!r} is not a date (YYYY-MM-DD)") from None
    _in_bounds("start", first)
    if last < first:
        raise _bad("end", "must not be before start")
    if (last - first).days + 1 > report.MAX_RANGE_DAYS:
        raise _bad("end", f"at most {report.MAX_RANGE_DAYS} days from start")
    return first, last


def parse_choice(params, name: str, choices, default: str | None) -> str:
    raw = params.get(name) or default
    if raw not in choices:
        raise _bad(name, f"{raw!r}: use one of {', '.join(choices)}")
    return raw


@document_viewset("energy", "metering tree node", "metering tree nodes")
class MeterNodeViewSet(viewsets.ModelViewSet):
    queryset = MeterNode.objects.select_related("site")
    serializer_class = MeterNodeSerializer

    @extend_schema(
        tags=["energy"],
        summary="Consumption of a metering node",
        description="Use per period (day/week/month) over start..end for one fuel, against "
        "the expected use. " + STAFF_READ,
        parameters=[
            OpenApiParameter("start", OpenApiTypes.DATE),
            OpenApiParameter("end", OpenApiTypes.DATE),
            OpenApiParameter("period", OpenApiTypes.STR, enum=list(consumption.PERIODS)),
            OpenApiParameter("fuel", OpenApiTypes.STR, enum=list(benchmarks.FUELS)),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def consumption(self, request, pk=None):
        node = self.get_object()
        first, last = parse_range(request.query_params)
        period = parse_choice(request.query_params, "period", consumption.PERIODS, "day")
        tree = report.Tree.load(node.site)
        fuels = tree.fuels(node.pk)
        fuel = parse_choice(
            request.query_params, "fuel", benchmarks.FUELS, fuels[0] if fuels else "electricity"
        )
        return Response(report.node_report(tree, node, fuel, first, last, period))

    @extend_schema(
        tags=["energy"],
        summary="Performance line of a metering node",
        description="Use against heating degree days over the baseline: slope per HDD, base "
        "load per day, r². `line` is null (with the reason) until there is enough data. "
        "`weekly`: the same over the baseline's whole Monday-Sunday weeks (weekly totals, base "
        "load per week), null under 3 whole weeks with use and degree days. " + STAFF_READ,
        parameters=[OpenApiParameter("fuel", OpenApiTypes.STR, enum=list(benchmarks.FUELS))],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def performance(self, request, pk=None):
        node = self.get_object()
        fuel = parse_choice(request.query_params, "fuel", benchmarks.FUELS, benchmarks.GAS)
        tree = report.Tree.load(node.site)
        line = report.performance_line(tree, node, fuel)
        # weekly totals over the baseline's whole weeks (docs/ENERGY.md "Performance line")
        weekly = report.line_json(report.weekly_performance_line(tree, node, fuel), "week")
        if line is None:
            return Response({"node": node.pk, "fuel": fuel, "line": None, "weekly": weekly,
                             "reason": "needs baseline_start, baseline_end, an outside temperature "
                                       "feed and at least 3 days with use and degree days"})  # fmt: skip
        return Response(
            {"node": node.pk, "fuel": fuel,
             "line": {"slope_per_hdd": line.slope, "base_load_per_day": line.base_load,
                      "r2": line.r2, "days": line.n},
             "weekly": weekly}
        )  # fmt: skip

    def _monthly(self, request) -> monthly.MonthlyReport:
        node = self.get_object()
        if node.kind != MeterNode.Kind.BUILDING:
            raise _bad("node", f"'{node}' is a {node.kind}: reports are per building")
        try:
            year, month = monthly.parse_month(request.query_params.get("month"))
        except monthly.BadMonth as exc:
            raise _bad("month", str(exc)) from None
        return monthly.build(node, year, month)

    @extend_schema(
        tags=["energy"],
        summary="Monthly report of a building (PDF)",
        description="The month's figures as on the staff page: use against the model per "
        "day and fuel, CUSUM, kWh/m², cost, CO₂e, with charts (docs/ENERGY.md). " + STAFF_READ,
        parameters=[MONTH_PARAMETER],
        responses={(200, "application/pdf"): OpenApiTypes.BINARY},
    )  # fmt: skip
    @action(detail=True, methods=["get"], url_path="report.pdf")
    def report_pdf(self, request, pk=None):
        rep = self._monthly(request)
        return _download(report_pdf.render(rep), "application/pdf", rep.filename("pdf"))

    @extend_schema(
        tags=["energy"],
        summary="Monthly report of a building (CSV)",
        description="One row per fuel and day (actual, status, expected, CUSUM, cost, kg "
        "CO₂e, HDD) and a total row per fuel; a gap is an empty cell. " + STAFF_READ,
        parameters=[MONTH_PARAMETER],
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )  # fmt: skip
    @action(detail=True, methods=["get"], url_path="report.csv")
    def report_csv(self, request, pk=None):
        rep = self._monthly(request)
        return _download(monthly.to_csv(rep), "text/csv; charset=utf-8", rep.filename("csv"))


def _download(body: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@document_viewset("energy", "meter", "meters")
class MeterViewSet(viewsets.ModelViewSet):
    queryset = Meter.objects.select_related("node", "node__site", "feed").prefetch_related("terms")
    serializer_class = MeterSerializer


SLUG_OR_ID = re.compile(r"[-\w]+")


@extend_schema_field(OpenApiTypes.STR)
class SiteIdOrSlugField(serializers.Field):
    """A site by its numeric id or its slug (`3` or `cat-demo`); an id is tried first, so a
    site whose slug is all digits is found by the slug only when no site has that id."""

    default_error_messages = {"missing": "no site with id or slug {value!r}"}

    def to_representation(self, value):
        return value.pk

    def to_internal_value(self, data):
        raw = str(data).strip()
        # Only what a slug can hold reaches the database: a NUL in a text lookup is an error
        # on PostgreSQL (found by the schema fuzz test: a 500).
        if not raw or len(raw) > 100 or not SLUG_OR_ID.fullmatch(raw):
            self.fail("missing", value=raw[:40])
        site = None
        if raw.isascii() and raw.isdigit() and len(raw) <= 18:
            site = Site.objects.filter(pk=int(raw)).first()
        site = site or Site.objects.filter(slug=raw).first()
        if site is None:
            self.fail("missing", value=raw)
        return site


class UploadSerializer(serializers.Serializer):
    site = SiteIdOrSlugField(help_text="the site's numeric id or its slug")
    file = serializers.FileField()


@document_viewset("energy", "expected-use row", "expected-use rows (energy model)")
class ExpectedUseViewSet(viewsets.ModelViewSet):
    queryset = ExpectedUse.objects.select_related("node")
    serializer_class = ExpectedUseSerializer

    @extend_schema(
        tags=["energy"],
        summary="Upload an energy model (CSV)",
        description="Replaces expected use from a CSV file (docs/ENERGY.md); `site` is the "
        "site's numeric id or its slug. A bad row is a 400 naming `file` and `row`. "
        + ENGINEERS_WRITE,
        request={"multipart/form-data": UploadSerializer},
        responses={201: OpenApiTypes.OBJECT},
    )
    @action(detail=False, methods=["post"], parser_classes=[MultiPartParser, FormParser])
    def upload(self, request):
        form = UploadSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        if upload.size > model_csv.MAX_BYTES:
            raise _bad("file", f"larger than {model_csv.MAX_BYTES} bytes")
        try:
            rows = model_csv.parse(
                upload.read(model_csv.MAX_BYTES + 1), form.validated_data["site"]
            )
            stored = model_csv.store(rows)
        except model_csv.BadModelCsv as exc:
            body = {"file": [str(exc)]}
            if exc.row is not None:
                body["row"] = [str(exc.row)]
            raise ValidationError(body) from None
        return Response({"stored": stored}, status=201)


@document_viewset("energy", "fuel rate", "fuel rates (tariffs)")
class FuelRateViewSet(viewsets.ModelViewSet):
    queryset = FuelRate.objects.all()
    serializer_class = FuelRateSerializer


@document_viewset("energy", "grid carbon period", "grid carbon periods")
class GridCarbonPeriodViewSet(viewsets.ModelViewSet):
    queryset = GridCarbonPeriod.objects.all()
    serializer_class = GridCarbonPeriodSerializer


@document_viewset("energy", "report recipient", "report recipients")
class ReportRecipientViewSet(viewsets.ModelViewSet):
    queryset = ReportRecipient.objects.select_related("node")
    serializer_class = ReportRecipientSerializer


@document_viewset("energy", "energy site", "energy sites")
class EnergySiteViewSet(viewsets.ModelViewSet):
    queryset = EnergySite.objects.all()
    serializer_class = EnergySiteSerializer


def _site(params) -> Site:
    """The `site` of a figure or a refresh: the site's numeric id or its slug, as the model
    upload takes it (an outside check found the league refusing the slug)."""
    raw = params.get("site")
    if raw is None or raw == "":
        raise _bad("site", "required: the site's id or slug")
    if not isinstance(raw, (str, int)) or isinstance(raw, bool):
        raise _bad("site", f"{str(raw)[:40]!r} is not a site id or slug")
    try:
        return SiteIdOrSlugField().to_internal_value(raw)
    except ValidationError as exc:
        raise _bad("site", str(exc.detail[0])) from None


class LeagueView(APIView):
    """Buildings of a site by kWh/m² over start..end, with DEC rating and change."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "site",
                OpenApiTypes.STR,
                required=True,
                description="the site's numeric id or its slug",
            ),
            OpenApiParameter("start", OpenApiTypes.DATE),
            OpenApiParameter("end", OpenApiTypes.DATE),
        ],
        responses=LeagueSerializer,
        tags=["energy"],
        summary="League of buildings",
        description="Buildings of a site by kWh/m² over start..end (default the last year), "
        "with DEC rating and change. " + STAFF_READ,
    )
    def get(self, request):
        site = _site(request.query_params)
        first, last = parse_range(request.query_params, default_days=365)
        return Response(
            {"site": site.pk, "first": first.isoformat(), "last": last.isoformat(),
             "buildings": report.league(report.Tree.load(site), first, last)}
        )  # fmt: skip


class RefreshView(APIView):
    """POST site, start, end: recompute the days of every meter of the site from the feeds."""

    MAX_DAYS = 400

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
        tags=["energy"],
        summary="Recompute energy days from the feeds",
        description="For every meter of `site`, recompute the days start..end (at most 400, "
        "default the last 3) from the feeds. " + ENGINEERS_WRITE,
        examples=[
            OpenApiExample("last week", value={"site": 1, "start": "2030-01-01",
                                               "end": "2030-01-07"}, request_only=True),
            OpenApiExample("done", value={"site": 1, "days_written": 14}, response_only=True),
        ],
    )  # fmt: skip
    def post(self, request):
        if not isinstance(request.data, Mapping):  # a JSON list or scalar, not the object asked
            raise _bad("body", "a JSON object with site, start and end is required")
        site = _site(request.data)
        first, last = parse_range(request.data, default_days=3)
        if (last - first).days + 1 > self.MAX_DAYS:
            raise _bad("end", f"at most {self.MAX_DAYS} days per refresh request")
        meters = Meter.objects.filter(node__site=site).select_related("node__site", "feed")
        written = refresh.refresh(meters, first, last)
        return Response({"site": site.pk, "days_written": written})
