"""The error every failed schedule primitive raises."""
from __future__ import annotations

from ...ir.errors import TVMSError


class ScheduleError(TVMSError):
    """A schedule primitive could not be applied; the schedule is left as it was before the call."""
