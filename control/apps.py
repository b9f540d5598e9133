from django.apps import AppConfig


class ControlConfig(AppConfig):
    name = "control"
    verbose_name = "Control"

    def ready(self) -> None:
        # Alarms about a deleted zone, plant, board or circuit clear (alarms/subjects.py).
        from control.alarm_subjects import register_all

        register_all()
