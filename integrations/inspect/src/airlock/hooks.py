"""The clean shutdown at the end of an eval: the Inspect hook `airlock/shutdown` deletes the
runner's reply queue and closes the connection when the run ends.

It is registered when the first fleet client is created, not when the package is imported:
Inspect announces every registered hook when an eval starts, and evals that never use
Airlock should not hear about it.
"""

from __future__ import annotations

from inspect_ai.hooks import Hooks, RunEnd, hooks

from .client import has_clients, shutdown


class FleetShutdown(Hooks):
    """Closes the fleet clients of the run's event loop when the run ends."""

    def enabled(self) -> bool:
        """Only while a fleet client exists on the running event loop."""
        return has_clients()

    async def on_run_end(self, data: RunEnd) -> None:
        """Closes the idle clients (deletes their reply queues, closes the connection)."""
        await shutdown()


_installed = False


def install() -> None:
    """Registers the hook with Inspect, once per process."""
    global _installed
    if not _installed:
        hooks(name="shutdown", description="Closes the Airlock fleet connection when a run ends.")(FleetShutdown)
        _installed = True
