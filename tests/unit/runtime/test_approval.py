"""Approved-app pinning: the hash names one app bundle (Flower's FAB, whose pyproject.toml it normalizes),
and only listed hashes run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fedloom.errors import ConfigError
from fedloom.runtime.flower.approval import app_hash, is_approved, parse_approved

APP = Path(__file__).resolve().parents[3] / "deploy" / "flower"
H1, H2 = "a" * 64, "0123456789abcdef" * 4


def test_the_app_hash_is_stable_and_changes_with_its_content(tmp_path):
    copy = tmp_path / "app"
    shutil.copytree(APP, copy)
    assert app_hash(APP) == app_hash(copy)  # Flower builds the bundle deterministically
    (copy / "extra.py").write_text("x = 1\n")
    with_module = app_hash(copy)
    assert with_module != app_hash(APP)
    (copy / "extra.py").write_text("x = 2\n")
    assert app_hash(copy) not in {with_module, app_hash(APP)}


def test_a_folder_without_an_app_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a Flower app"):
        app_hash(tmp_path)


def test_approved_hashes_from_values_and_files(tmp_path):
    listing = tmp_path / "approved.txt"
    listing.write_text(f"# fedloom 0.1\n{H2.upper()}  # upper case is fine\n\n")
    assert parse_approved([H1, str(listing)]) == {H1, H2}


@pytest.mark.parametrize("values", [["abc"], [], ["g" * 64]])
def test_anything_but_digests_is_a_config_error(values):
    with pytest.raises(ConfigError, match="approved-app"):
        parse_approved(values)


def test_only_a_named_and_listed_app_runs():
    approved = frozenset({H1})
    assert is_approved(H1, approved)
    assert not is_approved(H2, approved)
    assert not is_approved("", approved) and not is_approved(None, approved)  # fail closed
