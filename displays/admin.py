from django.contrib import admin
from django.utils.html import format_html

from displays.models import Display, Panel


class PanelInline(admin.StackedInline):
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

    @admin.display(description="kiosk")
    def open_kiosk(self, display: Display) -> str:
        return format_html('<a href="/kiosk/{}/" target="_blank">open</a>', display.slug)


@admin.register(Panel)
class PanelAdmin(admin.ModelAdmin):
    list_display = ["label", "display", "kind", "unit", "order"]
    list_filter = ["display", "kind"]
    search_fields = ["label"]
    filter_horizontal = ["feeds"]
