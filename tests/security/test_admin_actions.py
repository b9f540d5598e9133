"""Admin actions x roles, from both sides.

A viewer could run "Rotate write key" from the node changelist, was shown the new key and
posted a fake 2 °C as the node; admin actions without `permissions=` are open to every role
that may view the list. Here every action of every registered ModelAdmin has a row naming
the roles that may run it (a new action without a row fails test_every_admin_action_has_a_row),
and each action is run with a real POST to the changelist by every role, checking that its
effect happened for the allowed roles only.
"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import RequestFactory
from django.utils import timezone

from tests.security.conftest import World
from tests.wsgi_client import WsgiClient as Client

VIEWER, BOOKER, ENGINEER, SUPER = "viewer", "booker", "engineer", "superuser"
ROLES = (VIEWER, BOOKER, ENGINEER, SUPER)
USERNAMES = {VIEWER: "viewer", BOOKER: "booker", ENGINEER: "engineer", SUPER: "root"}
WRITERS = frozenset({ENGINEER, SUPER})
ONLY_SUPER = frozenset({SUPER})
NOBODY: frozenset[str] = frozenset()

# (model, action) -> roles that may run it. delete_selected is Django's own action on every
# model, allowed with the delete permission: engineers on our apps' models, bookers also on
# bookings, only superusers on users, groups, tokens and the lockout log; the command audit
# log nobody.
DELETE = "delete_selected"
MATRIX: dict[tuple[str, str], frozenset[str]] = {
    ("sensors.node", "rotate_write_key"): WRITERS,
    ("alarms.alarm", "acknowledge_selected"): WRITERS,
    ("axes.accessattempt", "cleanup_expired_attempts"): ONLY_SUPER,
    ("sensors.gatewaykey", "rotate_gateway_key"): WRITERS,
    # Bookings and overrides are cancelled, never deleted (the audit trail keeps them).
    ("control.booking", "cancel_selected"): frozenset({BOOKER, ENGINEER, SUPER}),
    ("control.override", "cancel_selected"): WRITERS,
    ("control.booking", DELETE): NOBODY,
    ("control.override", DELETE): NOBODY,
    ("control.outputoverride", "cancel_selected"): WRITERS,
    ("control.outputoverride", DELETE): NOBODY,
    # Alarms are a record (API.md: never edited): acknowledged, never deleted.
    ("alarms.alarm", DELETE): NOBODY,
    # Findings keep who marked them what (docs/FINDINGS.md): never deleted.
    ("findings.finding", DELETE): NOBODY,
    # A BACnet controller is shown, not edited, in the admin (its history): removed with its
    # node.
    ("sensors.bacnetdevice", DELETE): NOBODY,
    # The programme audit (schedules, calendars, rooms: the staff pages write it) is a record.
    ("control.programmechange", DELETE): NOBODY,
    **{
        (model, DELETE): WRITERS
        for model in (
            "control.heatingplant",
            "control.heatmain",
            "control.nodecommand",
            "control.optimumstartlog",
            "control.relayboard",
            "control.schedule",
            "control.sitecalendar",
            "control.solarcircuit",
            "control.zone",
            "control.zonetuning",
            "displays.display",
            "displays.panel",
            "energy.energysite",
            "energy.expecteduse",
            "energy.fuelrate",
            "energy.gridcarbonperiod",
            "energy.meter",
            "energy.meternode",
            "energy.reportrecipient",
            "feeds.feed",
            "sensors.actuator",
            # deleting an origin makes the next import_emoncms bring that object in anew
            "sensors.emoncmsorigin",
            "sensors.gatewaykey",
            "sensors.modbusbus",
            "sensors.modbusregister",
            "sensors.node",
            "sensors.sensor",
            "sensors.site",
        )
    },  # fmt: skip
    ("control.actuatorcommand", DELETE): NOBODY,
    ("control.analoguecommand", DELETE): NOBODY,
    **{
        (model, DELETE): ONLY_SUPER
        for model in (
            "auth.group",
            "auth.user",
            "axes.accessattempt",
            "axes.accessfailurelog",
            "axes.accesslog",
            "knox.authtoken",
        )
    },  # fmt: skip
}


def _actions_for(model_admin, user: User) -> set[str]:
    request = RequestFactory().get("/admin/")
    request.user = user
    return set(model_admin.get_actions(request))


def test_every_admin_action_has_a_row_and_only_its_roles_get_it(world: World):
    users = {role: User.objects.get(username=name) for role, name in USERNAMES.items()}
    seen: set[tuple[str, str]] = set()
    wrong = []
    for model, model_admin in admin.site._registry.items():
        label = model._meta.label_lower
        offered = {role: _actions_for(model_admin, user) for role, user in users.items()}
        names = set().union(*offered.values()) | {name for name, _ in admin.site.actions}
        names |= {a if isinstance(a, str) else a.__name__ for a in model_admin.actions or ()}
        for name in names:
            seen.add((label, name))
            allowed = MATRIX.get((label, name))
            if allowed is None:
                wrong.append(f"{label}: action {name!r} has no row in MATRIX")
                continue
            got = {role for role in ROLES if name in offered[role]}
            if got != allowed:
                wrong.append(f"{label}.{name}: offered to {sorted(got)}, want {sorted(allowed)}")
    wrong += [f"{label}.{name}: row for no action" for label, name in set(MATRIX) - seen]
    assert not wrong, "\n".join(wrong)


def _login(role: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=USERNAMES[role]))
    return client


def _post_action(role: str, url: str, action: str, pks: list[int], **extra) -> Client:
    client = _login(role)
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], "index": "0", **extra}
    client.last_response = client.post(url, data, follow=True)  # type: ignore[attr-defined]
    return client


@pytest.mark.parametrize("role", ROLES)
def test_rotate_write_key_only_for_engineers_and_the_log_names_who(world: World, role: str):
    from sensors.models import Node

    node = Node.objects.get(pk=world.ids["node-a"])
    old_hash = node.key_hash
    client = _post_action(role, "/admin/sensors/node/", "rotate_write_key", [node.pk])
    page = client.last_response.content.decode()  # type: ignore[attr-defined]
    node.refresh_from_db()
    rotated = node.key_hash != old_hash
    assert rotated is (role in WRITERS), f"{role} rotated={rotated}"
    assert ("New write key" in page) is (role in WRITERS)
    entries = LogEntry.objects.filter(object_id=str(node.pk), change_message__contains="write key")
    if role in WRITERS:
        assert list(entries.values_list("user__username", flat=True)) == [USERNAMES[role]]
    else:
        assert not entries.exists()
        # the old key still works: the node is not locked out
        response = Client().get(
            "/input/post", {"node": "node-a", "json": "t:21", "apikey": world.keys["node-a"]}
        )
        assert response.status_code == 200, response.content


@pytest.mark.parametrize("role", ROLES)
def test_acknowledge_selected_only_for_engineers_as_in_the_api(world: World, role: str):
    from alarms.models import Alarm

    alarm_id = world.ids["alarm"]
    _post_action(role, "/admin/alarms/alarm/", "acknowledge_selected", [alarm_id])
    alarm = Alarm.objects.get(pk=alarm_id)
    if role in WRITERS:
        assert alarm.acknowledged_by is not None
        assert alarm.acknowledged_by.username == USERNAMES[role]
    else:
        assert alarm.acknowledged_at is None and alarm.acknowledged_by is None


@pytest.mark.parametrize("role", ROLES)
def test_cleanup_expired_login_attempts_only_for_superusers(world: World, role: str):
    from axes.models import AccessAttempt

    client = _login(role)  # before the attempt exists: each login cleans expired ones too
    old = timezone.now() - timezone.timedelta(days=2)
    attempt = AccessAttempt.objects.create(
        username="x", ip_address="192.0.2.1", user_agent="", failures_since_start=3
    )
    AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=old)
    data = {"action": "cleanup_expired_attempts", "_selected_action": [attempt.pk], "index": "0"}
    client.post("/admin/axes/accessattempt/", data, follow=True)
    gone = not AccessAttempt.objects.filter(pk=attempt.pk).exists()
    assert gone is (role == SUPER)


DELETE_CASES = [
    ("control", "booking", "booking", NOBODY),
    ("sensors", "node", "node-b", WRITERS),
    ("control", "actuatorcommand", "command", NOBODY),
    ("control", "outputoverride", "output_override", NOBODY),
    ("alarms", "alarm", "alarm", NOBODY),
    ("findings", "finding", "finding", NOBODY),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("app", "model", "key", "allowed"), DELETE_CASES)
def test_delete_selected_from_both_sides(world, role, app, model, key, allowed):
    from django.apps import apps

    model_class = apps.get_model(app, model)
    pk = world.ids[key]
    _post_action(role, f"/admin/{app}/{model}/", DELETE, [pk], post="yes")
    deleted = not model_class.objects.filter(pk=pk).exists()
    assert deleted is (role in allowed), f"{role} deleted {model}: {deleted}"


def test_rotating_through_the_api_is_logged_with_the_user_too(world: World, engineer_api):
    node_id = world.ids["node-a"]
    assert engineer_api.post(f"/api/v1/nodes/{node_id}/rotate-key").status_code == 200
    entry = LogEntry.objects.get(object_id=str(node_id))
    assert entry.user.username == "engineer"
    assert "write key" in entry.get_change_message()


CANCEL_CASES = [
    ("booking", "booking", frozenset({BOOKER, ENGINEER, SUPER})),
    ("override", "override", WRITERS),
    ("outputoverride", "output_override", WRITERS),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("model", "key", "allowed"), CANCEL_CASES)
def test_cancel_selected_from_both_sides(world, role, model, key, allowed):
    """A viewer could cancel bookings and overrides from the changelist (no `permissions=`)."""
    from django.apps import apps

    model_class = apps.get_model("control", model)
    pk = world.ids[key]
    _post_action(role, f"/admin/control/{model}/", "cancel_selected", [pk])
    obj = model_class.objects.get(pk=pk)  # never deleted, whoever asks
    assert obj.cancelled is (role in allowed), f"{role} cancelled {model}: {obj.cancelled}"
    if obj.cancelled:
        assert obj.cancelled_by == USERNAMES[role]


@pytest.mark.parametrize("role", [VIEWER, BOOKER])
def test_every_admin_change_page_opens_read_only_for_view_only_roles(world: World, role: str):
    """A booker got a 500 on a node's change page (an inline's field could not be
    shown read-only). Every registered model's change page, for its first object, must answer
    200 (read-only view) or 403 to a role that may only view, never 500."""
    client = _login(role)
    wrong = []
    opened = 0
    for model, _model_admin in admin.site._registry.items():
        obj = model._default_manager.order_by("pk").first()
        if obj is None:
            continue
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/{obj.pk}/change/"
        status = client.get(url).status_code
        opened += 1
        if status not in (200, 302, 403):
            wrong.append(f"{url}: {status}")
    assert opened > 20
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("role", [ENGINEER, SUPER])
def test_no_one_deletes_an_alarm_from_its_delete_page(world: World, role: str):
    """API.md: alarms are never edited, only acknowledged; engineers could delete them."""
    from alarms.models import Alarm

    alarm_id = world.ids["alarm"]
    client = _login(role)
    url = f"/admin/alarms/alarm/{alarm_id}/delete/"
    assert client.get(url).status_code == 403
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Alarm.objects.filter(pk=alarm_id).exists()
    assert client.get(f"/admin/alarms/alarm/{alarm_id}/change/").status_code == 200
