# The Alarm model moved from sensors to its own app. Its table (sensors_alarm) and rows stay:
# this migration only tells Django's state where the model now lives, and moves the content
# type so permissions already given to people and groups keep applying.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if ContentType.objects.filter(app_label="alarms", model="alarm").exists():
        return
    ContentType.objects.filter(app_label="sensors", model="alarm").update(app_label="alarms")


def move_content_type_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if ContentType.objects.filter(app_label="sensors", model="alarm").exists():
        return
    ContentType.objects.filter(app_label="alarms", model="alarm").update(app_label="sensors")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("sensors", "0008_host_validators"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Alarm",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("key", models.CharField(db_index=True, help_text="Identifies the condition, e.g. 'node-silent:7'.", max_length=200)),
                        ("severity", models.CharField(choices=[("info", "Info"), ("warning", "Warning"), ("critical", "Critical")], default="warning", max_length=10)),
                        ("source", models.CharField(help_text="Which part raised it: node, relay, feeds ...", max_length=50)),
                        ("message", models.TextField()),
                        ("raised_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("cleared_at", models.DateTimeField(blank=True, null=True)),
                        ("acknowledged_at", models.DateTimeField(blank=True, null=True)),
                        ("acknowledged_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "sensors_alarm",
                        "ordering": ["-raised_at"],
                        "constraints": [models.UniqueConstraint(condition=models.Q(("cleared_at__isnull", True)), fields=("key",), name="alarm_one_open_per_key")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
