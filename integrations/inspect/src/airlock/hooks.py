"""The clean shutdown at the end of an eval: the Inspect hook `airlock/shutdown` deletes the
runner's reply queue and closes the connection when the run ends. It is enabled only while
this process holds a connection to a fleet, so evals that do not use Airlock never see it."""

from __future__ import annotations

from inspect_ai.hooks import Hooks, RunEnd, hooks

from .client import has_clients, shutdown


@hooks(name="shutdown", description="Closes the Airlock fleet connection when a run ends.")
class FleetShutdown(Hooks):
    """Closes the fleet clients of the run's event loop when the run ends."""

    def enabled(self) -> bool:
        """Only while a fleet client exists on the running event loop."""
        return has_clients()

    async def on_run_end(self, data: RunEnd) -> None:
        """Closes the idle clients (deletes their reply queues, closes the connection)."""
        await shutdown()
