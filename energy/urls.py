from django.urls import path

from energy import views

urlpatterns = [
    path("staff/energy/", views.energy_page, name="staff-energy"),
    path("staff/energy/model/", views.energy_model_upload, name="staff-energy-model"),
]
