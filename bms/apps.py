from django.apps import AppConfig


class BmsConfig(AppConfig):
    name = "bms"
    verbose_name = "Open BMS"
