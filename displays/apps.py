from django.apps import AppConfig


class DisplaysConfig(AppConfig):
    name = "displays"
    verbose_name = "Kiosk displays"
