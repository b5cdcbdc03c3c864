"""The module Inspect's `inspect_ai` entry point loads: importing it registers the approver
and the reviewer `airlock/fleet` and the shutdown hook."""

from .approver import fleet_approver
from .hooks import FleetShutdown
from .reviewer import fleet_reviewer

__all__ = ["FleetShutdown", "fleet_approver", "fleet_reviewer"]
