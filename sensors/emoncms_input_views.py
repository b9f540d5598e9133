"""emoncms's /input/* reads and process-list paths, answered as emoncms 11.16 answers them
(Modules/input/input_controller.php; shapes: sensors/emoncms_inputs.py).

Key rules as emoncms's (feeds/web/emoncms_access.py): list, get and getinputs need a read key
(any staff role); process/get and process/set sit in emoncms's write block, so they need a
write key (an engineer's API token). A node or gateway key is a device key: refused here.
"""

from __future__ import annotations

import re

from django.db import transaction
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core.openapi import ENGINEERS_WRITE, STAFF_READ
from feeds.web.emoncms_access import (
    EmoncmsApiView,
    emoncms_error,
    require_read,
    require_write,
)
from sensors import emoncms_inputs
from sensors.models import Sensor, Site
from sensors.process_validation import check_process_list

Q = OpenApiParameter.QUERY
TAGS = ["emoncms-compatible", "sensors"]
KEYS = " A key is a staff API token as `apikey=` or `Authorization: Bearer` (emoncms style). "
APIKEY = OpenApiParameter("apikey", OpenApiTypes.STR, Q, description="staff API token")
SITE = OpenApiParameter(
    "site", OpenApiTypes.STR, Q, description="only this site's inputs (its slug)"
)
INPUTID = OpenApiParameter("inputid", OpenApiTypes.INT, Q, required=True,
                           description="the input (sensor) id")  # fmt: skip
# emoncms keeps only these characters of a node or input name in input/get (preg_replace with
# [^\p{N}\p{L}_\s\-.]); the rest are dropped before the lookup.
MAX_NAME_CHARS = 64  # Node.name and Sensor.key are at most 64 characters
MAX_SITE_CHARS = 50  # a SlugField


def _clean_name(raw: str) -> str:
    return "".join(c for c in raw if c.isalnum() or c.isspace() or c in "_-.")


def _found(request: Request, slug: str | None = None) -> list[Sensor]:
    """The inputs staff may read here: one site's (`slug`, else `?site=`) or every site's."""
    slug = slug or request.query_params.get("site") or None
    if slug is not None:
        if len(slug) > MAX_SITE_CHARS or not re.fullmatch(r"[-a-zA-Z0-9_]+", slug):
            raise ValidationError({"site": ["must be a site's slug"]})
        if not Site.objects.filter(slug=slug).exists():
            raise NotFound(f"site {slug!r} does not exist")
    return list(emoncms_inputs.sensors(slug))


class InputList(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms input/list.json: every input with its last value",
        description="Input::getlist: `[{id, nodeid, name, description, processList, time, "
        "value}]`, ids as strings, the process list in emoncms's text form. " + KEYS
        + STAFF_READ,
        parameters=[SITE, APIKEY],
        responses={200: OpenApiTypes.OBJECT},
        examples=[OpenApiExample("one input", response_only=True, value=[
            {"id": "7", "nodeid": "emontx", "name": "power1", "description": "",
             "processList": "1:12,4:13", "time": 1714564800, "value": 1520.5}])],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        require_read(request)
        return Response(emoncms_inputs.rows(_found(request)))


class InputGetInputs(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms input/getinputs.json: inputs by node, with ids",
        description="Input::get_inputs: `{nodeid: {name: {id, processList}}}` (`[]` when "
        "there are none, as PHP encodes an empty array)." + KEYS + STAFF_READ,
        parameters=[SITE, APIKEY],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        require_read(request)
        return Response(emoncms_inputs.by_node(_found(request), with_values=False) or [])


class _OperationPerPath(AutoSchema):
    """One view serves /input/get, /input/get/{node} and /input/get/{node}/{name}: each path
    gets its own operation id (spectacular would otherwise number them)."""

    def get_operation_id(self) -> str:
        return "emoncms_" + re.sub(r"\W+", "_", self.path.strip("/")).strip("_")


class InputGet(EmoncmsApiView):
    schema = _OperationPerPath()

    @extend_schema(
        tags=TAGS,
        summary="emoncms input/get: inputs by node with their last values",
        description="Input::get_inputs_v2. `/input/get`: `{nodeid: {name: {time, value, "
        "processList}}}`; `/input/get/<node>` (or `?node=`): that node's `{name: {...}}`; "
        "`/input/get/<node>/<name>` (or `&name=`): one `{time, value, processList}`. A node "
        'or input that does not exist: 404 "Node does not exist" / "Node variable does not '
        'exist" (emoncms answers those strings with 200). Node names are unique per site: '
        "a name two sites share needs `site=` (else 400 naming `site` and the sites); "
        "without it, the whole listing labels such nodes `<site slug>/<name>`, and "
        "`/input/get/<site slug>/<node>` (and `.../<node>/<name>`) answers for that site's "
        "node, as `site=` does." + KEYS
        + STAFF_READ,
        parameters=[
            OpenApiParameter("node", OpenApiTypes.STR, Q),
            OpenApiParameter("name", OpenApiTypes.STR, Q),
            SITE,
            APIKEY,
        ],
        responses={200: OpenApiTypes.OBJECT,
                   404: OpenApiResponse(description='{"success": false, "message"}')},
    )  # fmt: skip
    def get(
        self,
        request: Request,
        node: str | None = None,
        name: str | None = None,
        site: str | None = None,
    ):
        require_read(request)
        params = request.query_params
        if site is None and name is not None and _site_then_node(node, name, params):
            # /input/get/home/emontx: list.json's `nodeid` of a name two sites share
            site, node, name = node, name, None
        if site is not None and params.get("site") not in (None, "", site):
            return emoncms_error(f"site: the path names {site[:MAX_SITE_CHARS]!r}, site= "
                                 "another", 400, "site")  # fmt: skip
        # emoncms's route takes a format off the last part: /input/get/emontx/power1.json
        if name is not None:
            name = name.removesuffix(".json")
        elif node is not None:
            node = node.removesuffix(".json")
        node = node if node is not None else params.get("node")
        name = name if name is not None else params.get("name")
        for value, field in ((node, "node"), (name, "name")):
            if value is not None and len(value) > MAX_NAME_CHARS:
                return emoncms_error(f"{field}: at most {MAX_NAME_CHARS} characters", 400, field)
        sensors = _found(request, site)
        inputs = emoncms_inputs.by_node(sensors, with_values=True)
        if node is None:
            return Response(inputs or [])
        sites = emoncms_inputs.sites_of_node(sensors, _clean_name(node))
        if len(sites) > 1:
            # Names are unique per site, and a staff key reads every site: emoncms's one user
            # has one node of a name, so say which ones there are rather than pick one.
            return emoncms_error(
                f"node {_clean_name(node)!r} is in {len(sites)} sites ({', '.join(sites)}): "
                "choose one with site=<slug>",
                400,
                "site",
            )
        found = inputs.get(_clean_name(node))
        if found is None and site is not None:  # one site's node, labelled `<slug>/<name>`
            found = inputs.get(f"{site}/{_clean_name(node)}")
        if found is None:
            return emoncms_error("Node does not exist", 404, "node")
        if name is None:
            return Response(found)
        if (one := found.get(_clean_name(name))) is None:
            return emoncms_error("Node variable does not exist", 404, "name")
        return Response(one)


def _site_then_node(first: str | None, second: str, params) -> bool:
    """Whether /input/get/<first>/<second> means site `first`, node `second`: `first` is a
    site's slug, no readable node is named `first`, and neither `site=` nor `.json` says
    otherwise. A node named as a site keeps its emoncms meaning (node, then input)."""
    if first is None or params.get("site") or len(first) > MAX_SITE_CHARS:
        return False
    if not re.fullmatch(r"[-a-zA-Z0-9_]+", first) or second.endswith(".json"):
        return False
    return (
        Site.objects.filter(slug=first).exists()
        and not emoncms_inputs.sensors().filter(node__name=_clean_name(first)).exists()
    )


def _sensor(request: Request) -> Sensor | Response:
    raw = request.query_params.get("inputid", "")
    if not (raw.isascii() and raw.isdigit() and 0 < len(raw) < 19):
        return emoncms_error("inputid: required, an input (sensor) id", 400, "inputid")
    sensor = Sensor.objects.select_related("node").filter(pk=int(raw)).first()
    if sensor is None:
        # emoncms: `belongs_to_user` fails and nothing answers (its 406); here a plain 404
        return emoncms_error("Input does not exist", 404, "inputid")
    return sensor


class ProcessGet(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms input/process/get.json: an input's process list",
        description="Input::get_processlist: the list in emoncms's text form "
        '(`"1:12,4:13"`; `""` when empty). In emoncms\'s write block, so it needs a write '
        "key." + KEYS + ENGINEERS_WRITE,
        parameters=[INPUTID, APIKEY],
        responses={200: OpenApiTypes.STR},
        examples=[OpenApiExample("list", value="1:12,4:13", response_only=True)],
    )
    def get(self, request: Request) -> Response:
        require_write(request)
        sensor = _sensor(request)
        if isinstance(sensor, Response):
            return sensor
        return Response(emoncms_inputs.encode(sensor.processes))


class ProcessSet(EmoncmsApiView):
    parser_classes = [FormParser, MultiPartParser]

    @extend_schema(
        tags=TAGS,
        summary="emoncms input/process/set.json: replace an input's process list",
        description="Input::set_processlist: `inputid` in the query, `processlist` as a form "
        "field, in 11.16's JSON (`[{\"fn\": \"process__log_to_feed\", \"args\": [12]}]`) or "
        "the older text (`1:12,4:13`). Checked exactly as the sensor API checks a list "
        "(known process, arguments, feeds and inputs that exist and belong to this input's "
        "site, daily feeds for daily steps); any problem: 400 naming the step, and the "
        "stored list is kept. Answers `{success: true, message: \"Input processlist "
        "updated\", encoded_processlist}`." + KEYS + ENGINEERS_WRITE,
        parameters=[INPUTID, APIKEY],
        request={"application/x-www-form-urlencoded": {
            "type": "object", "properties": {"processlist": {"type": "string"}}}},
        responses={200: OpenApiTypes.OBJECT,
                   400: OpenApiResponse(description='{"success": false, "message"} naming the step')},
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        require_write(request)
        sensor = _sensor(request)
        if isinstance(sensor, Response):
            return sensor
        raw = request.POST.get("processlist")
        if raw is None:
            return emoncms_error("processlist: required (a form field)", 400, "processlist")
        if len(raw) > emoncms_inputs.MAX_PROCESSLIST_CHARS:
            limit = emoncms_inputs.MAX_PROCESSLIST_CHARS
            return emoncms_error(f"processlist: at most {limit:,} characters", 400, "processlist")
        steps, errors = emoncms_inputs.decode(raw)
        if not errors:
            steps, errors = check_process_list(
                steps, site_id=sensor.node.site_id, exclude_sensor=sensor.pk
            )
        if errors:
            return emoncms_error("; ".join(errors), 400, "processlist")
        with transaction.atomic():
            sensor.processes = steps
            sensor.save(update_fields=["processes"])
        return Response({"success": True, "message": "Input processlist updated",
                         "encoded_processlist": emoncms_inputs.encode(steps)})  # fmt: skip
