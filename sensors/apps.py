from django.apps import AppConfig


class SensorsConfig(AppConfig):
    name = "sensors"
    verbose_name = "Sites, nodes and sensors"

    def ready(self) -> None:
        # Connects the save signals that drop cached node keys and sensor maps in every
        # process (web, workers, manage.py shell), not only those that imported ingest.
        import sensors.cache  # noqa: F401
