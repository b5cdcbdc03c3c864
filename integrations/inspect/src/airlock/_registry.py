"""The module Inspect's `inspect_ai` entry point loads: importing it registers the approver
and the reviewer `airlock/fleet`."""

from .approver import fleet_approver
from .reviewer import fleet_reviewer

__all__ = ["fleet_approver", "fleet_reviewer"]
