"""OpenAPI documentation wiring shared by the apps (drf-spectacular, /api/schema/).

Each app documents its own operations in its api.py (`document_viewset`, `extend_schema`);
this module holds what they share: who-may-call sentences (roles: core/roles.py, enforced by
core/permissions.py), the tag list, and the two schema hooks named in
SPECTACULAR_SETTINGS:

- `add_plain_views` (preprocessing): drf-spectacular only enumerates DRF views. The ingest
  endpoints (`/api/v1/readings`, `/input/*`) and the node command queue are plain Django views
  on purpose (hot path, emoncms answers), so each carries a documentation-only APIView
  (`@documented_by(...)`); the hook adds those to the endpoint list, where drf-spectacular
  builds their operations like any other (the endpoint list is the hook's documented interface).
- `describe_schema` (postprocessing): tag descriptions and the node-key security schemes.

`/api/schema/` is public (docs/API.md) and generating it took 0.58 s of CPU per request:
`CachedSchemaView` builds it once per process and keeps each rendering (YAML, JSON).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from django.http import HttpResponse
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.generators import EndpointEnumerator
from drf_spectacular.hooks import postprocess_schema_enums
from drf_spectacular.utils import extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authentication import BaseAuthentication
from rest_framework.views import APIView

# --- who may call (docs/API.md#permissions) -------------------------------------------------
STAFF_READ = (
    "Who may call: any staff role (viewers, bookers, engineers) and superusers. "
    "Without credentials 401; a user in none of the role groups 403."
)
ENGINEERS_WRITE = (
    "Who may call: engineers and superusers; viewers and bookers get 403, anonymous callers 401."
)
BOOKERS_WRITE = (
    "Who may call: bookers, engineers and superusers; viewers get 403, anonymous callers 401."
)
NODE_KEY = (
    "Who may call: a node, with its own write key (`createnode`, `rotate-key`) as "
    "`Authorization: Bearer <key>`. Staff tokens and sessions are not accepted here."
)
NODE_OR_GATEWAY_KEY = (
    "Who may call: a node with its write key, or a gateway with a gateway key, as "
    "`Authorization: Bearer <key>` or `apikey=` (emoncms style). Staff tokens are not "
    "accepted here."
)
FEED_READERS = (
    "Who may call: staff in any role read every feed; anyone (also anonymous) reads feeds "
    "marked public; a private feed answers 403 (401 without credentials). A staff token may "
    "also be given as `apikey=`."
)

TAGS = [
    (
        "ingest",
        "Readings from nodes (node write key): the first endpoint a device developer needs.",
    ),
    ("emoncms-compatible", "emoncms input and feed paths, unchanged for emonTx/emonPi/emonhub."),
    ("node-commands", "The command queue an HTTP node polls and acknowledges (node write key)."),
    ("sites", "Sites: time zone, location, grid carbon intensity."),
    ("nodes", "Nodes (devices that post readings) and their write keys."),
    ("sensors", "Sensors, their calibration and process lists; Modbus register maps."),
    ("feeds", "Feed configuration and typed feed data."),
    ("control", "Zones, schedules, actuators, the command audit log and plant status."),
    ("bookings", "Room bookings (bookers may write)."),
    ("overrides", "Manual overrides with expiry."),
    ("alarms", "Alarms: read, acknowledge."),
    ("energy", "Metering tree, meters, energy model, tariffs, consumption, league."),
    ("findings", "Find the waste: faults found in the site's own records, with their weekly cost."),
    ("displays", "Kiosk displays and their panels."),
]

_ACTION_SUMMARIES = {
    "list": "List {plural}",
    "retrieve": "Get one {noun}",
    "create": "Create a {noun}",
    "update": "Replace a {noun}",
    "partial_update": "Change some fields of a {noun}",
    "destroy": "Delete a {noun}",
}


def document_viewset(
    tag: str,
    noun: str,
    plural: str,
    *,
    write: str = ENGINEERS_WRITE,
    about: str = "",
    **actions: dict[str, Any],
) -> Callable[[type], type]:
    """A summary, a description (what, then who may call) and a tag for each standard action
    of a viewset; `actions` adds or overrides `extend_schema` arguments per action (examples,
    a better summary, an extra `description` sentence). Custom @action methods keep their own
    `extend_schema` and get the tag from the class."""

    def decorate(cls: type) -> type:
        schemas = {}
        for action, summary in _ACTION_SUMMARIES.items():
            if not hasattr(cls, action):
                continue
            extra = dict(actions.get(action, {}))
            who = STAFF_READ if action in ("list", "retrieve") else write
            text = " ".join(part for part in (about, extra.pop("description", ""), who) if part)
            schemas[action] = extend_schema(
                tags=[tag],
                summary=extra.pop("summary", summary.format(noun=noun, plural=plural)),
                description=text,
                **extra,
            )
        return extend_schema(tags=[tag])(extend_schema_view(**schemas)(cls))

    return decorate


# --- plain Django views -----------------------------------------------------------------------
def documented_by(doc: type[APIView]) -> Callable[[Callable], Callable]:
    """Attach a documentation-only APIView to a plain Django view (outermost decorator)."""

    def attach(view: Callable) -> Callable:
        view.openapi_doc = doc  # type: ignore[attr-defined]
        return view

    return attach


class NodeKeyBearer(BaseAuthentication):
    """Names the node-key header in the schema; never used to authenticate (doc views only)."""

    def authenticate(self, request):
        return None


class NodeKeyQuery(BaseAuthentication):
    """Names the emoncms `apikey=` node key in the schema; doc views only."""

    def authenticate(self, request):
        return None


class NodeKeyBearerScheme(OpenApiAuthenticationExtension):
    target_class = NodeKeyBearer
    name = "nodeKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A node's (or gateway's) write key: `Authorization: Bearer <key>`.",
        }


class NodeKeyQueryScheme(OpenApiAuthenticationExtension):
    target_class = NodeKeyQuery
    name = "nodeKeyQuery"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "query",
            "name": "apikey",
            "description": "emoncms style: the node or gateway key as `apikey=` "
            "(also `devicekey=`, or in the form body).",
        }


def _walk(patterns, prefix: str = "") -> Iterator[tuple[str, Callable]]:
    for pattern in patterns:
        regex = prefix + str(pattern.pattern)
        if isinstance(pattern, URLPattern):
            yield regex, pattern.callback
        elif isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, regex)


def add_plain_views(endpoints: list[tuple]) -> list[tuple]:
    """PREPROCESSING_HOOKS: every URL whose view carries `openapi_doc`, documented by it.

    A path given with and without its trailing slash is listed once."""
    enumerator = EndpointEnumerator()
    seen = {path.rstrip("/") for path, *_ in endpoints}
    added = []
    for regex, callback in _walk(get_resolver().url_patterns):
        doc = getattr(callback, "openapi_doc", None)
        if doc is None:
            continue
        path = enumerator.get_path_from_regex(regex)
        if path.rstrip("/") in seen:
            continue
        seen.add(path.rstrip("/"))
        view = doc.as_view()
        for method in enumerator.get_allowed_methods(view):
            added.append((path, regex, method, view))
    return [*endpoints, *added]


def describe_schema(result: dict, generator, **kwargs) -> dict:
    """POSTPROCESSING_HOOKS: the enum hook drf-spectacular runs by default, then tag
    descriptions in a fixed order (Swagger UI groups by them)."""
    result = postprocess_schema_enums(result, generator, **kwargs)
    result["tags"] = [{"name": name, "description": text} for name, text in TAGS]
    return result


class CachedSchemaView(SpectacularAPIView):
    """SpectacularAPIView with the schema generated once per process, and each format
    rendered once: the API does not change while the process runs, and the schema is public,
    so its cost must not be anyone's to ask for.

    The same schema is served whatever the request's `version` or `lang` (the API has one
    version and its descriptions are written in English): those parameters used to make a new
    schema each time too. The schema is the public one (SERVE_PUBLIC), the same for every
    caller, so caching it hides nothing."""

    _schema: ClassVar[dict | None] = None
    _rendered: ClassVar[dict[str, bytes]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def forget(cls) -> None:
        """Drop what was built (tests)."""
        with cls._lock:
            cls._schema, cls._rendered = None, {}

    def _schema_once(self, request) -> dict:
        cls = type(self)
        if cls._schema is None:
            with cls._lock:  # threads of one worker: the first builds, the others wait for it
                if cls._schema is None:
                    generator = self.generator_class(urlconf=self.urlconf, patterns=self.patterns)
                    cls._schema = generator.get_schema(request=request, public=self.serve_public)
        return cls._schema

    def _get_schema_response(self, request):
        schema = self._schema_once(request)
        renderer, media_type = request.accepted_renderer, request.accepted_media_type
        key = f"{type(renderer).__module__}.{type(renderer).__qualname__}"
        body = type(self)._rendered.get(key)
        if body is None:
            body = renderer.render(schema, media_type, {"request": request, "view": self})
            type(self)._rendered[key] = body
        charset = getattr(renderer, "charset", None)
        content_type = (
            f"{renderer.media_type}; charset={charset}" if charset else renderer.media_type
        )
        response = HttpResponse(body, content_type=content_type)
        response["Content-Disposition"] = f'inline; filename="{self._get_filename(request, None)}"'
        return response
