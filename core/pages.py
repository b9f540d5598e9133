"""The one gate of every staff page (issue #24: it was written three ways, with two 403s).

`@staff_page` lets in a logged-in user with a staff role (core/permissions.has_staff_role:
a superuser, or in the engineers, bookers or viewers group). Anyone else is refused one way:

- anonymous: redirected to the login page, to come back after logging in;
- logged in without a role: PermissionDenied, so Django's 403 handler renders 403.html, the
  same styled "Not allowed" page a view's own refusal (a booker posting an override) shows.

What a role may do on a page (engineers override, bookers book) stays with the page: it raises
PermissionDenied with its reason, and the person sees that same page with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from core.permissions import has_staff_role

NO_STAFF_ROLE = (
    "Your account is not in a staff role (engineers, bookers or viewers) that may see this."
)

View = Callable[..., HttpResponse]


def staff_page(view: View) -> View:
    """Decorate a staff page's view: logged in with a staff role, or refused (see above)."""

    @login_required
    @wraps(view)
    def gate(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not has_staff_role(request.user):
            raise PermissionDenied(NO_STAFF_ROLE)
        return view(request, *args, **kwargs)

    return gate
