from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from staff import aside_views, bacnet_views, calendars, findings, input_views, plants, schedules
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
    path("staff/inputs/", input_views.inputs_page, name="staff-inputs"),
    path("staff/inputs/<int:pk>/processes/", input_views.process_list, name="staff-process-list"),
    path(
        "staff/inputs/<int:pk>/processes/save",
        input_views.process_list_save,
        name="staff-process-list-save",
    ),
    path("staff/inputs/set-aside/", aside_views.aside_list, name="staff-set-aside"),
    path(
        "staff/inputs/set-aside/<int:node_pk>/<str:entry>/retry",
        aside_views.aside_retry,
        name="staff-set-aside-retry",
    ),
    path(
        "staff/inputs/set-aside/<int:node_pk>/<str:entry>/discard",
        aside_views.aside_discard,
        name="staff-set-aside-discard",
    ),
    path("staff/bacnet/", bacnet_views.bacnet_page, name="staff-bacnet"),
    path("staff/bacnet/discover", bacnet_views.bacnet_discover, name="staff-bacnet-discover"),
    path("staff/bacnet/browse", bacnet_views.bacnet_browse, name="staff-bacnet-browse"),
    path("staff/bacnet/add", bacnet_views.bacnet_add, name="staff-bacnet-add"),
    path(
        "staff/bacnet/<int:pk>/settings", bacnet_views.bacnet_settings, name="staff-bacnet-settings"
    ),
    path("staff/bacnet/<int:pk>/poll", bacnet_views.bacnet_poll_now, name="staff-bacnet-poll"),
    path(
        "staff/bacnet/zones/<int:pk>/writes",
        bacnet_views.bacnet_zone_writes,
        name="staff-bacnet-zone-writes",
    ),
    path(
        "staff/bacnet/feeds/<int:pk>/export",
        bacnet_views.bacnet_feed_export,
        name="staff-bacnet-feed-export",
    ),
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
    path("staff/findings/", findings.finding_list, name="staff-findings"),
    path("staff/findings/<int:pk>/state", findings.finding_state, name="staff-finding-state"),
    path(
        "staff/findings/<int:pk>/evidence.json",
        findings.finding_evidence,
        name="staff-finding-evidence",
    ),
    path("staff/schedules/", schedules.schedule_list, name="staff-schedules"),
    path("staff/schedules/new/", schedules.schedule_edit, name="staff-schedule-new"),
    path("staff/schedules/rooms/", schedules.rooms, name="staff-rooms"),
    path("staff/schedules/<int:pk>/", schedules.schedule_edit, name="staff-schedule-edit"),
    path("staff/plants/", plants.plant_list, name="staff-plants"),
    path("staff/plants/new/", plants.plant_edit, name="staff-plant-new"),
    path("staff/plants/<int:pk>/", plants.plant_edit, name="staff-plant-edit"),
    path("staff/plants/solar/new/", plants.solar_edit, name="staff-solar-new"),
    path("staff/plants/solar/<int:pk>/", plants.solar_edit, name="staff-solar-edit"),
    path("staff/calendars/", calendars.calendar_list, name="staff-calendars"),
    path("staff/calendars/<int:pk>/", calendars.calendar_detail, name="staff-calendar"),
    path(
        "staff/calendars/<int:pk>/entries/<int:entry_pk>/delete/",
        calendars.entry_delete,
        name="staff-calendar-entry-delete",
    ),
]
