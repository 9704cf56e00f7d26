"""backend.tuning.apply.put_back: how a stopped tuner or rollout puts the cluster back."""

from __future__ import annotations

import pytest

from backend.errors import ConnectError, ConsoleError
from backend.tuning.apply import put_back


def test_put_back_asks_again_while_the_cluster_does_not_answer() -> None:
    calls, sleeps = [], []

    def write():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectError("dashboard refused the connection")
        return True, ""

    assert put_back(write, 60.0, "the config", sleep=sleeps.append) == (True, "")
    assert len(calls) == 3 and sleeps == [1.0, 1.0]


def test_put_back_answers_what_write_answers_without_retrying() -> None:
    calls = []

    def write():
        calls.append(1)
        return False, "app/dep is no longer on the cluster."

    assert put_back(write, 60.0, "the config", sleep=lambda _: None) == (
        False, "app/dep is no longer on the cluster.")
    assert len(calls) == 1


def test_put_back_gives_up_after_its_time_with_the_last_error() -> None:
    def write():
        raise OSError("connection reset")

    ok, why = put_back(write, 0.0, "the weights", sleep=lambda _: None)
    assert not ok
    assert why == "could not put the weights back: connection reset"


def test_put_back_lets_other_errors_through() -> None:
    def write():
        raise KeyError("a bug, not a cluster that is away")

    with pytest.raises(KeyError):
        put_back(write, 60.0, "the config", sleep=lambda _: None)


def test_put_back_retries_only_what_it_is_told_to() -> None:
    class Stopped(Exception):
        pass

    seen = []

    def write():
        seen.append(1)
        if len(seen) == 1:
            raise Stopped("cancelled")
        return True, ""

    assert put_back(write, 60.0, "the config", retry_on=(Stopped, ConsoleError),
                    sleep=lambda _: None) == (True, "")
    assert len(seen) == 2
