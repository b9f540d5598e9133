# The Alarm model now lives in the alarms app (alarms/migrations/0001_initial.py), on the same
# table: sensors forgets it in Django's state only; no row or table is touched.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sensors", "0008_host_validators"),
        ("alarms", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Alarm")],
            database_operations=[],
        ),
    ]
