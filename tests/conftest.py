"""Test-wide settings: hypothesis never fails a test because one example was slow.

Under CI hypothesis loads its own "ci" profile (derandomized, no deadline); elsewhere
the same no-deadline rule applies, since these tests share 2-core machines with servers.
"""

from __future__ import annotations

from hypothesis import settings

if settings.get_current_profile_name() != "ci":
    settings.register_profile("agent-threads", deadline=None)
    settings.load_profile("agent-threads")
