"""The gang scheduler's fixtures (tests/support/gang_scheduler.py) for the tests of this directory."""

from tests.support.gang_scheduler import gang_scheduler, gang_scheduler_session

__all__ = ["gang_scheduler", "gang_scheduler_session"]
