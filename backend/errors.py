"""Errors the backend raises with messages meant for the user, not for a traceback."""

from __future__ import annotations


class ConsoleError(RuntimeError):
    """Base: str(error) is a complete sentence a user can act on."""


class ConnectError(ConsoleError):
    """The address does not lead to a usable Ray dashboard."""


class RefusedError(ConnectError):
    """The connection was refused, reset or aborted: nothing listens at the address (a
    wrong port), or a head that was running has stopped. `cause` says which, in words."""

    def __init__(self, message: str, cause: str = "connection refused") -> None:
        super().__init__(message)
        self.cause = cause


class AnswerTimeout(ConnectError):
    """The dashboard did not answer in time (connect or read timeout): it may be gone,
    or only busy."""


class AuthError(ConnectError):
    """The dashboard refused the request (401 no token, 403 wrong token)."""


class ApiError(ConsoleError):
    """The dashboard answered, but refused or failed the request."""

    def __init__(self, message: str, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class WriteConflict(ConsoleError):
    """Another writer (a second console, `serve deploy`) changed the Serve config around
    this console's read–modify–write. `written` says whether this console's PUT was sent:
    False — stopped before writing, nothing of the other writer's is lost; True — sent,
    and the cluster then showed another writer's change."""

    def __init__(self, message: str, written: bool, apps: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.written = written
        self.apps = apps
