"""A DRF router that accepts paths with or without the trailing slash.

Nodes and scripts post to `/api/v1/readings`; browsers and docs often add a slash.
Neither should get a 404 or a redirect that drops a POST body.
"""

from rest_framework.routers import SimpleRouter


class OptionalSlashRouter(SimpleRouter):
    def __init__(self) -> None:
        super().__init__(trailing_slash=True)
        self.trailing_slash = "/?"
