from django.apps import AppConfig


class SensorsConfig(AppConfig):
    name = "sensors"
    verbose_name = "Sites, nodes and sensors"

    def ready(self) -> None:
        # Connects the save signals that drop cached node keys and sensor maps in every
        # process (web, workers, manage.py shell), not only those that imported ingest.
        import sensors.cache

        # A node saved or deleted anywhere drops its site's refused names and, when deleted,
        # its ingest stream and live state (sensors/ingest/registration.py, node_cleanup.py).
        import sensors.ingest.node_cleanup
        import sensors.ingest.registration  # noqa: F401

        # Alarms about a removed node, sensor range, key or site clear (alarms/subjects.py).
        from sensors.alarm_subjects import register_all

        register_all()
