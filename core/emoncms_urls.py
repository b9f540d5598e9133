"""emoncms's site-level paths (core/emoncms_user.py): mounted at the root by bms/urls.py."""

from django.urls import path

from core import emoncms_user

urlpatterns = [
    path("describe", emoncms_user.Describe.as_view(), name="emoncms-describe"),
    path("version", emoncms_user.Version.as_view(), name="emoncms-version"),
    path("user/auth.json", emoncms_user.Auth.as_view(), name="emoncms-user-auth"),
]
