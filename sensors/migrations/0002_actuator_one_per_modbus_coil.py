"""One enabled actuator per Modbus coil.

Existing duplicates fought over their relay every tick; before the constraint is added, the
host spellings are normalised and every duplicate but the oldest is disabled (never switched),
with a note in its description saying why, so the engineer can choose which one to keep.
"""

from django.db import migrations, models


def disable_duplicates(apps, schema_editor):
    Actuator = apps.get_model("sensors", "Actuator")
    seen: set[tuple] = set()
    for a in Actuator.objects.order_by("pk"):
        host = (a.host or "").strip().lower()
        if host != a.host:
            a.host = host
            a.save(update_fields=["host"])
        if a.driver != "modbus_coil" or not a.enabled:
            continue
        key = (host, a.port, a.device_id, a.coil)
        if key in seen:
            a.enabled = False
            a.description = (
                f"{a.description}\n" if a.description else ""
            ) + "Disabled by migration: another actuator drives the same coil."
            a.save(update_fields=["enabled", "description"])
        seen.add(key)


class Migration(migrations.Migration):
    dependencies = [
        ("sensors", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(disable_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="actuator",
            constraint=models.UniqueConstraint(
                condition=models.Q(("driver", "modbus_coil"), ("enabled", True)),
                fields=("host", "port", "device_id", "coil"),
                name="actuator_one_per_modbus_coil",
                violation_error_message="Another enabled actuator already drives this coil.",
            ),
        ),
    ]
