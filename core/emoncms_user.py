"""emoncms's site-level paths: /describe, /version and /user/auth.json.

emoncms clients find a server and log in through these (its index.php answers /describe and
/version before any module; Modules/user/user_controller.php routes `auth` to
User::get_apikeys_from_login). Here they need only Django's User and the staff API tokens
(core/api_tokens.py), so they live in core.

/user/auth.json goes through the login lockout (core/login_lockout.py): Django's `authenticate`
with the request, so a failure is counted against the username and client IP like a failed
admin login, and a locked-out pair gets 429 without its password being checked.
"""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import api_tokens
from core.login_lockout import USERNAME_CHARS
from core.permissions import has_staff_role
from core.throttle import PublicRateThrottle

# What /describe answers: emoncms's own word (index.php, when Redis holds no "describe"), which
# emonhub and the emoncms apps look for when they probe a host.
DESCRIBE = "emoncms"
# The emoncms release whose API these paths answer as (its version.json); clients compare it
# to decide which API they may use.
EMONCMS_API_VERSION = "11.16.8"
# A password longer than any a person types is refused before it is hashed (PBKDF2 of a
# megabyte is CPU a client should not be able to spend).
MAX_PASSWORD_CHARS = 4096
TAGS = ["emoncms-compatible"]
ANYONE = "Who may call: anyone (no key needed), as in emoncms."


class _Plain(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list = []
    renderer_classes = [JSONRenderer]
    throttle_classes = [PublicRateThrottle]


def _text(body: str) -> HttpResponse:
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Access-Control-Allow-Origin"] = "*"  # as emoncms: a hub finder runs in a browser
    return response


class Describe(_Plain):
    @extend_schema(
        tags=TAGS,
        summary="emoncms describe: what kind of server this is",
        description="The text `emoncms` (text/plain), as emoncms answers it, so emonhub and the "
        "emoncms apps recognise the server. " + ANYONE,
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> HttpResponse:
        return _text(DESCRIBE)


class Version(_Plain):
    @extend_schema(
        tags=TAGS,
        summary="emoncms version: the emoncms API version answered",
        description=f"`{EMONCMS_API_VERSION}` (text/plain): the emoncms release whose API the "
        "emoncms-compatible paths follow (docs/MOVING_FROM_EMONCMS.md). " + ANYONE,
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> HttpResponse:
        return _text(EMONCMS_API_VERSION)


def _refuse(message: str, status: int, field: str | None = None) -> Response:
    # emoncms's shape ({"success": false, "message"}), with our `error` and field beside it.
    body: dict = {"success": False, "message": message, "error": message}
    if field:
        body["field"] = field
    return Response(body, status=status)


AUTH_ANSWER = inline_serializer(
    "EmoncmsAuth",
    {
        "success": serializers.BooleanField(),
        "userid": serializers.IntegerField(required=False),
        "apikey_write": serializers.CharField(required=False),
        "apikey_read": serializers.CharField(required=False),
        "message": serializers.CharField(required=False),
    },
)


class Auth(_Plain):
    parser_classes = [FormParser, MultiPartParser]

    @extend_schema(
        tags=TAGS,
        summary="emoncms user/auth.json: API keys from a username and password",
        description="POST `username` and `password` (form fields, as emoncms's apps send "
        "them). Answers `{success, userid, apikey_write, apikey_read}` with a new staff API "
        "token in both keys: what the token may do is the user's role (engineers write, "
        "viewers and bookers read). Each call issues a new token; the user's oldest go "
        "beyond BMS_API_TOKENS_PER_USER. Wrong credentials count towards the login lockout "
        "(BMS_LOGIN_FAILURE_LIMIT per username and address, BMS_LOGIN_IP_FAILURE_LIMIT per "
        "address whatever the username): 429 once locked. "
        "Who may call: anyone with a staff user's password; a user in no role group gets 403.",
        request=inline_serializer(
            "EmoncmsAuthForm",
            {"username": serializers.CharField(), "password": serializers.CharField()},
        ),
        responses={
            200: AUTH_ANSWER,
            400: OpenApiResponse(AUTH_ANSWER, description="Username or password empty"),
            401: OpenApiResponse(AUTH_ANSWER, description="Incorrect authentication"),
            403: OpenApiResponse(AUTH_ANSWER, description="The user has no staff role"),
            429: OpenApiResponse(AUTH_ANSWER, description="Locked out: too many attempts"),
        },
        examples=[
            OpenApiExample(
                "keys",
                value={"success": True, "userid": 3, "apikey_write": "9f2c…",
                       "apikey_read": "9f2c…"},
                response_only=True,
            )
        ],
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        # emoncms reads post('username'), post('password'): form fields only.
        username = request.POST.get("username", "")
        password = request.POST.get("password", "")
        if not username or not password:
            return _refuse(
                "Username or password empty", 400, "username" if not username else "password"
            )
        if "\x00" in username:  # PostgreSQL cannot even be asked for such a name
            return _refuse("username: NUL bytes are not allowed", 400, "username")
        if len(username) > USERNAME_CHARS:
            return _refuse("Incorrect authentication", 401, "username")  # no user is named so
        if len(password) > MAX_PASSWORD_CHARS:
            return _refuse(f"password: at most {MAX_PASSWORD_CHARS} characters", 400, "password")
        django_request = request._request
        user = authenticate(django_request, username=username, password=password)
        if getattr(django_request, "axes_locked_out", False):
            # Answered here in emoncms's shape; axes' middleware would put its own page instead.
            django_request.axes_locked_out = False
            return _refuse("Too many attempts, please try again later", 429, "username")
        if user is None:
            return _refuse("Incorrect authentication", 401)
        if not has_staff_role(user):
            return _refuse("This user has no staff role, so no key would read anything", 403)
        _, token, _ = api_tokens.issue(user)
        return Response(
            {"success": True, "userid": user.pk, "apikey_write": token, "apikey_read": token}
        )
