from django.apps import AppConfig


class ControlConfig(AppConfig):
    name = "control"
    verbose_name = "Control"

    def ready(self) -> None:
        # Alarms about a deleted zone, plant, board or circuit clear (alarms/subjects.py).
        from control.alarm_subjects import register_all

        register_all()

        # Actuators live a layer below control (sensors): their check against the relay
        # board's coil count is registered from here.
        from control.board_coils import coil_beyond_board
        from sensors.models import ACTUATOR_CHECKS

        if coil_beyond_board not in ACTUATOR_CHECKS:
            ACTUATOR_CHECKS.append(coil_beyond_board)

        # Feeds live below control too: a feed shown on the site's BACnet device, or taken off
        # it, through the API or the admin, goes into the change history (feeds/save_audit.py).
        from control.change_audit import feed_bacnet_auditor
        from feeds import save_audit

        save_audit.register(feed_bacnet_auditor)
