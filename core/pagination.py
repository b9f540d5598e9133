"""LimitOffsetPagination with bounds, so a huge `offset` is a 400, not a database error."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

# PostgreSQL's OFFSET is a bigint: a larger one failed with "bigint out of range", a 500
# (found by schemathesis on PostgreSQL).
MAX_OFFSET = 2**63 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 1000

    def get_offset(self, request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"must be at most {MAX_OFFSET}"]})
        return offset
