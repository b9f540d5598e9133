from django.urls import path

from displays import views

app_name = "displays"

urlpatterns = [
    path("kiosk/", views.kiosk_index, name="index"),
    path("kiosk/<slug:slug>/", views.kiosk, name="kiosk"),
    path("kiosk/<slug:slug>/data.json", views.kiosk_json, name="data"),
]
