from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from staff import export as staff_export
from staff import help as staff_help
from staff import views as staff_views

urlpatterns = [
    path("", RedirectView.as_view(url="/staff/", permanent=False)),
    # Browsers ask for /favicon.ico on every page, the admin's included.
    path("favicon.ico", RedirectView.as_view(url=static("core/favicon.svg"), permanent=True)),
    path("staff/", staff_views.overview, name="staff-overview"),
    path("staff/feeds/", staff_views.feed_explorer, name="staff-feeds"),
    path("staff/feeds/export.csv", staff_export.feed_export_csv, name="staff-feed-export"),
    path("staff/feeds/export.xlsx", staff_export.feed_export_xlsx, name="staff-feed-export-xlsx"),
    path("staff/alarms/", staff_views.alarm_list, name="staff-alarms"),
    path("staff/help/<str:name>", staff_help.help_page, name="staff-help"),
    path(
        "staff/alarms/acknowledge-all",
        staff_views.alarm_acknowledge_all,
        name="staff-alarm-ack-all",
    ),
    path(
        "staff/alarms/<int:pk>/acknowledge", staff_views.alarm_acknowledge, name="staff-alarm-ack"
    ),
]
