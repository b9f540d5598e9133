import time
from datetime import UTC, datetime

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from sensors.ingest import input_errors
from sensors.ingest import node_state as state
from sensors.models import (
    MODBUS_DEFAULT_BLOCK,
    Actuator,
    BacnetDevice,
    BacnetPoint,
    EmoncmsOrigin,
    GatewayKey,
    ModbusBus,
    ModbusRegister,
    Node,
    Sensor,
    Site,
)


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "slug",
        "time_zone",
        "latitude",
        "longitude",
        "grid_intensity_g_per_kwh",
        "history_budget_mb",
        "history_used",
    ]
    search_fields = ["name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["history_used"]

    @admin.display(description="history used / budget")
    def history_used(self, site: Site) -> str:
        """What the site's history has cost of its budget (sensors/ingest/history_budget.py)."""
        from sensors.ingest.history_budget import usage

        use = usage(site)
        return f"{use['used_mb']} MB of {use['budget_mb']} MB"


class SensorInline(admin.TabularInline):
    model = Sensor
    extra = 0
    # params is here because Sensor.clean() checks it against the kind: a kind changed in
    # this row must be able to show its params error on the row (Django raises ValueError
    # for an error on a field the form lacks).
    fields = ["key", "name", "kind", "unit", "scale", "offset", "params", "feed", "auto_created"]
    show_change_link = True
    autocomplete_fields = ["feed"]


class ModbusRegisterInline(admin.TabularInline):
    model = ModbusRegister
    extra = 0
    # The map's bound (sensors/devices/modbus_maps.py MAX_ROWS), enforced on save, not only shown.
    max_num = 200
    validate_max = True


def _register_map_choices() -> list[tuple[str, str]]:
    from sensors.devices.modbus_maps import shipped_maps

    return [("", "—")] + [(name, doc["title"]) for name, doc in shipped_maps().items()]


class NodeAdminForm(forms.ModelForm):
    register_map_template = forms.ChoiceField(
        choices=_register_map_choices,
        required=False,
        help_text="Modbus meters: replace the register map with a shipped one on save "
        "(its registers and inputs are created).",
    )

    class Meta:
        model = Node
        fields = "__all__"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Most nodes are not Modbus meters: an empty block size means the default. A view-only
        # user's form has no editable fields (read-only view), so the field may be absent.
        if "modbus_max_block" in self.fields:
            self.fields["modbus_max_block"].required = False

    def clean_modbus_max_block(self) -> int:
        value = self.cleaned_data.get("modbus_max_block")
        return MODBUS_DEFAULT_BLOCK if value is None else value


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "node_id",
        "protocol",
        "site",
        "location",
        "interval",
        "enabled",
        "key_prefix",
    ]
    # "Registered by a gateway key" lets an engineer find (and delete) a flood's junk nodes.
    list_filter = ["protocol", "enabled", "site", "auto_created"]
    search_fields = ["name", "location", "description"]
    readonly_fields = ["key_prefix", "created", "input_errors", "auto_created", "registered_by"]
    inlines = [SensorInline, ModbusRegisterInline]
    actions = ["rotate_write_key"]
    form = NodeAdminForm

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        template = form.cleaned_data.get("register_map_template")
        if template:
            from sensors.devices.modbus_maps import shipped_map
            from sensors.devices.modbus_meters import apply_register_map

            document = shipped_map(template)
            count = apply_register_map(form.instance, document["registers"], document["max_block"])
            self.message_user(request, f"Register map {document['title']}: {count} registers.")

    def save_model(self, request, obj, form, change):
        if not change:
            key = obj.set_new_key()
            self.message_user(
                request,
                f"Write key for node '{obj.name}': {key} — copy it now, it is shown only once.",
                messages.WARNING,
            )
        super().save_model(request, obj, form, change)

    @admin.display(description="last seen")
    def last_seen(self, node: Node) -> str:
        now = time.time()
        seen = state.heard_times({node.pk: node.interval}, now).get(node.pk)
        if seen is None:
            return "never"
        ago = int(now - seen)
        label = f"{ago} s ago" if ago < 120 else f"{ago // 60} min ago"
        if state.is_silent(seen, node.interval, now):
            return format_html('<strong style="color:#c0262d">silent · {}</strong>', label)
        return label

    @admin.display(description="input errors")
    def input_errors(self, node: Node) -> str:
        """Values skipped from accepted emoncms batches (sensors/ingest/input_errors.py)."""
        record = input_errors.summary(input_errors.node_subject(node.pk))
        if not record:
            return "none"
        at = datetime.fromtimestamp(int(record.get("at", 0)), UTC)
        return format_html(
            "{}, last at {}: <code>{}</code>",
            input_errors.counted(record),
            timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S"),
            record.get("last", ""),
        )

    @admin.display(description="last values (converted)")
    def last_values(self, node: Node) -> str:
        values = sorted(state.last_values(node.pk).items())
        if not values:
            return "none yet"
        return format_html_join(
            "", "<div><code>{}</code> = {} <span style='color:#666'>at {}</span></div>",
            ((key, f"{value:.6g}", timezone.localtime(datetime.fromtimestamp(t, UTC)).strftime("%H:%M:%S"))
             for key, (t, value) in values),
        )  # fmt: skip

    # permissions=: without it any role that may view nodes (viewers, bookers) could run it,
    # be shown the new key and post as the node.
    @admin.action(
        description="Rotate write key (the old key stops working)", permissions=["change"]
    )
    def rotate_write_key(self, request, queryset):
        for node in queryset:
            key = node.set_new_key()
            node.save(update_fields=["key_prefix", "key_hash"])
            self.log_change(request, node, "Rotated the write key.")  # who did it, in the log
            self.message_user(
                request,
                f"New write key for '{node.name}': {key} — shown only once.",
                messages.WARNING,
            )


@admin.register(GatewayKey)
class GatewayKeyAdmin(admin.ModelAdmin):
    """A site's key for a gateway (emonhub): it writes any node of its site. Engineers only:
    creating and rotating need the change/add permission, which viewers and bookers lack."""

    list_display = ["name", "site", "enabled", "key_prefix", "created"]
    list_filter = ["enabled", "site"]
    search_fields = ["name"]
    readonly_fields = ["key_prefix", "created"]
    actions = ["rotate_gateway_key"]

    def save_model(self, request, obj, form, change):
        if not change:
            key = obj.set_new_key()
            self.message_user(
                request,
                f"Gateway key '{obj.name}' for site '{obj.site}': {key} — copy it now, it is "
                "shown only once.",
                messages.WARNING,
            )
        super().save_model(request, obj, form, change)

    @admin.action(
        description="Rotate gateway key (the old key stops working)", permissions=["change"]
    )
    def rotate_gateway_key(self, request, queryset):
        for gateway in queryset:
            key = gateway.set_new_key()
            gateway.save(update_fields=["key_prefix", "key_hash"])
            self.message_user(
                request, f"New gateway key for '{gateway.name}': {key} — shown only once.",
                messages.WARNING,
            )  # fmt: skip


@admin.register(Sensor)
class SensorAdmin(admin.ModelAdmin):
    list_display = ["__str__", "node", "key", "kind", "unit", "feed", "auto_created", "created"]
    list_filter = ["auto_created", "kind", "node__protocol", "node"]
    search_fields = ["key", "name", "node__name"]
    autocomplete_fields = ["feed"]
    list_select_related = ["node", "feed"]


@admin.register(ModbusBus)
class ModbusBusAdmin(admin.ModelAdmin):
    list_display = ["name", "port", "baudrate", "parity", "stopbits", "timeout", "enabled", "site"]
    list_filter = ["enabled", "site"]
    search_fields = ["name", "port"]


@admin.register(EmoncmsOrigin)
class EmoncmsOriginAdmin(admin.ModelAdmin):
    """Which emoncms feed or input each imported object came from (manage.py import_emoncms);
    written by the import only, so read-only here."""

    list_display = ["source", "kind", "emoncms_id", "feed", "sensor", "imported"]
    list_filter = ["source", "kind"]
    readonly_fields = [f.name for f in EmoncmsOrigin._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ModbusRegister)
class ModbusRegisterAdmin(admin.ModelAdmin):
    list_display = ["node", "key", "address", "function", "data_type", "word_order", "scale",
                    "offset"]  # fmt: skip
    list_filter = ["function", "data_type", "node"]
    search_fields = ["key", "node__name"]


@admin.register(Actuator)
class ActuatorAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "driver", "host", "port", "device_id", "coil", "enabled"]
    list_filter = ["kind", "driver", "enabled", "site"]
    search_fields = ["name", "host", "description"]


class BacnetPointInline(admin.TabularInline):
    model = BacnetPoint
    fields = ["key", "object_type", "instance", "name", "units"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(BacnetDevice)
class BacnetDeviceAdmin(admin.ModelAdmin):
    """The BACnet controllers we poll, read-only: they are added with `manage.py bacnet add`
    (or the staff page's Discover) and tuned on the staff BACnet page, the API or the command.
    Here for their History (who changed the poll interval or timeout on the staff page, and
    when) and their points at a glance (docs/BACNET.md section 8)."""

    list_display = ["node", "address", "device_instance", "timeout_s", "vendor_name"]
    search_fields = ["node__name", "address"]
    readonly_fields = ["node", "address", "device_instance", "timeout_s", "vendor_name"]
    inlines = [BacnetPointInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # remove the node (admin, `manage.py bacnet remove`): its points go too
