from django.apps import AppConfig


class BmsConfig(AppConfig):
    name = "bms"
    verbose_name = "Open BMS"

    def ready(self) -> None:
        from bms import roles  # noqa: F401  (connects the post_migrate group setup)
