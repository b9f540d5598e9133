from django.urls import path

from control import schematic_views, views

app_name = "control"

urlpatterns = [
    path("staff/control/", views.plant_status, name="status"),
    path("staff/control/overrides/", views.create_override, name="override-create"),
    path("staff/control/overrides/<int:pk>/cancel/", views.cancel_override, name="override-cancel"),
    path(
        "staff/control/output-overrides/",
        views.create_output_override,
        name="output-override-create",
    ),
    path(
        "staff/control/output-overrides/<int:pk>/cancel/",
        views.cancel_output_override,
        name="output-override-cancel",
    ),
    path("staff/control/replay/<slug:zone_slug>/", views.replay_view, name="replay"),
    path("staff/control/plant/<int:pk>/", schematic_views.heating_plant, name="plant-schematic"),
    path("staff/control/solar/<int:pk>/", schematic_views.solar_circuit, name="solar-schematic"),
    path(
        "staff/control/heat-main/<int:pk>/", schematic_views.heat_main, name="heat-main-schematic"
    ),
    path("staff/bookings/", views.booking_index, name="booking-index"),
    path("staff/bookings/<slug:zone_slug>/", views.booking_calendar, name="bookings"),
    path("staff/bookings/<slug:zone_slug>/<int:pk>/", views.booking_edit, name="booking-edit"),
    path(
        "staff/bookings/<slug:zone_slug>/<int:pk>/cancel/",
        views.booking_cancel,
        name="booking-cancel",
    ),
    path(
        "staff/bookings/<slug:zone_slug>/<int:pk>/restore/",
        views.booking_restore,
        name="booking-restore",
    ),
]
