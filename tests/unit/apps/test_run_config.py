"""The ServerApp's true/false run-config keys are read strictly: a quoted 'false' once read as true and
`serve()` deleted the run directory."""

from __future__ import annotations

import pytest

from fedloom.apps.serverapp import switch
from fedloom.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("false", False), ("False", False), ("true", True)],
)
def test_true_and_false_quoted_or_not(value, expected):
    assert switch({"overwrite": value}, "overwrite") is expected


def test_an_absent_key_is_false():
    assert switch({}, "resume") is False


@pytest.mark.parametrize("value", ["no", "yes", "0", "", 1, 0.0, "falsey"])
def test_anything_else_is_refused(value):
    with pytest.raises(ConfigError, match=r"run config overwrite=.*: expected true or false"):
        switch({"overwrite": value}, "overwrite")
