"""The native module (crates/pyclient): Airlock's Rust client on a thread of its own."""

ANSWERED: int
"""A completion `(ANSWERED, ticket, encoded ReplyBody, None)`: the fleet's decision or error."""
UNANSWERED: int
"""A completion `(UNANSWERED, ticket, reason or None, None)`: the deadline passed."""
FAILED: int
"""A completion `(FAILED, ticket, message, None)`: the request could not be asked."""
PROGRESS: int
"""A completion `(PROGRESS, 0, correlation id, encoded Progress)`: a call waits for a person."""

class Client:
    def __init__(
        self,
        url: str,
        nodes: str,
        prefix: str,
        runner_id: str,
        connection_name: str,
        ca_file: str | None = None,
        fleet_keys: str | None = None,
        insecure: bool = False,
    ) -> None: ...
    def fileno(self) -> int: ...
    def ask(self, ticket: int, request: bytes, timeout: float, trace: dict[str, str] | None = None) -> None: ...
    def cancel(self, ticket: int, cancel: bytes | None = None) -> None: ...
    def drain(self) -> list[tuple[int, int, bytes | str | None, bytes | str | None]]: ...
    def stats(self) -> tuple[int, int, int, int, int, int, int]: ...
    def close(self) -> None: ...
