from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Open BMS core"

    def ready(self) -> None:
        from core import roles  # noqa: F401  (connects the post_migrate group setup)
