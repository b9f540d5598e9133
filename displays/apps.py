from django.apps import AppConfig


class DisplaysConfig(AppConfig):
    name = "displays"
    verbose_name = "Kiosk displays"

    def ready(self) -> None:
        # feeds may not import displays: displays tells the feed admin and API what it sees.
        from displays.warnings import public_displays_of_private_feed
        from feeds import save_warnings

        save_warnings.register(public_displays_of_private_feed)
