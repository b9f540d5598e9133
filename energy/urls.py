from django.urls import path

from energy import views

urlpatterns = [path("staff/energy/", views.energy_page, name="staff-energy")]
