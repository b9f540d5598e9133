from django.apps import AppConfig


class SensorsConfig(AppConfig):
    name = "sensors"
    verbose_name = "Sites, nodes and sensors"
