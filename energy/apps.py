from django.apps import AppConfig


class EnergyConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "energy"
    verbose_name = "Energy"
