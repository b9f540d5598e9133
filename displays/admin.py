from django.contrib import admin, messages
from django.utils.html import format_html

from core.choice_fields import BoundedIdsAdmin
from displays.models import Display, Panel
from displays.warnings import private_feed_warnings


def _warn(request, display: Display) -> None:
    for warning in private_feed_warnings(display):
        messages.warning(request, warning)


class PanelInline(BoundedIdsAdmin, admin.StackedInline):
    model = Panel
    extra = 0
    fields = [("kind", "order"), ("label", "unit", "colour"), "feeds", "options"]
    filter_horizontal = ["feeds"]


@admin.register(Display)
class DisplayAdmin(admin.ModelAdmin):
    list_display = ["title", "slug", "site", "theme", "refresh_s", "public", "open_kiosk"]
    list_filter = ["public", "theme", "site"]
    search_fields = ["title", "slug"]
    prepopulated_fields = {"slug": ["title"]}
    inlines = [PanelInline]

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)  # the panels and their feeds
        _warn(request, form.instance)

    @admin.display(description="kiosk")
    def open_kiosk(self, display: Display) -> str:
        return format_html('<a href="/kiosk/{}/" target="_blank">open</a>', display.slug)


@admin.register(Panel)
class PanelAdmin(BoundedIdsAdmin, admin.ModelAdmin):
    list_display = ["label", "display", "kind", "unit", "order"]
    list_filter = ["display", "kind"]
    search_fields = ["label"]
    filter_horizontal = ["feeds"]

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        _warn(request, form.instance.display)
