"""Broken data files give one error naming the file (and line), never a traceback or a silent table;
files are checked against MANIFEST.tsv. Corruptions are made on copies in tmp_path, never in the bundle."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fedloom.data.acl18 import FILES, Acl18Config, load_acl18
from fedloom.data.files import dataset_dir
from fedloom.data.generic import GenericConfig, load_generic
from fedloom.data.manifest import MANIFEST
from fedloom.data.reading import read_csv, read_jsonl
from fedloom.errors import DataError
from tests.conftest import SHARED_DATA

shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")


def _acl18_copy(root: Path, changed: dict[str, bytes]) -> Path:
    """``root/acl18`` with the real files linked, except ``changed`` ones written as given."""
    folder = root / "acl18"
    folder.mkdir(parents=True)
    for name in FILES:
        if name in changed:
            (folder / name).write_bytes(changed[name])
        else:
            (folder / name).symlink_to(SHARED_DATA / "acl18" / name)
    return folder


@shared
def test_duplicated_rows_are_counted_with_an_example(tmp_path):
    prices = (SHARED_DATA / "acl18" / "prices.csv").read_bytes()
    lines = prices.splitlines(keepends=True)
    _acl18_copy(tmp_path, {"prices.csv": prices + b"".join(lines[1:41])})
    with pytest.raises(DataError, match=r"prices\.csv: 40 duplicated \(ticker, date\) rows, e\.g\. ticker=AAPL"):
        load_acl18(tmp_path, Acl18Config())


@shared
@pytest.mark.parametrize("name", ["prices.csv", "tweets.jsonl"])
def test_a_file_cut_in_half_is_named(tmp_path, name):
    data = (SHARED_DATA / "acl18" / name).read_bytes()
    _acl18_copy(tmp_path, {name: data[: len(data) // 2]})
    with pytest.raises(DataError, match=rf"acl18/{name}: line \d+: "):
        load_acl18(tmp_path, Acl18Config())


@shared
def test_non_utf8_bytes_are_named_by_file_and_line(tmp_path):
    sectors = (SHARED_DATA / "acl18" / "sectors.csv").read_bytes().replace(b"Apple", b"Appl\xff\xfe", 1)
    _acl18_copy(tmp_path, {"sectors.csv": sectors})
    with pytest.raises(DataError, match=r"sectors\.csv: line \d+: not UTF-8 text \(byte 0xff at column"):
        load_acl18(tmp_path, Acl18Config())


def test_an_empty_csv_is_named(tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.csv is empty"):
        read_csv(tmp_path / "empty.csv")


def test_a_malformed_json_line_is_named_by_number(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"question": "1+1", "answer": "2"}\n{"question": "2+2", "answer": \n{"question": "x"}\n')
    with pytest.raises(DataError, match=r"train\.jsonl: line 2: malformed JSON \(Expecting value at character"):
        read_jsonl(path)


def test_a_date_that_does_not_parse_is_named_by_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("ticker,date,close\nA,2020-01-02,1.0\nA,2020-0")
    with pytest.raises(DataError, match=r"p\.csv: line 3: column 'date' is not a date"):
        read_csv(path, required=("ticker",), dates=("date",))


def _with_manifest(root: Path, folder: str, files: dict[str, bytes], listed: dict[str, bytes]) -> None:
    """``root/folder`` holding ``files``, and a MANIFEST.tsv listing ``listed`` (the originals)."""
    (root / folder).mkdir(parents=True)
    lines = ["path\tbytes\tsha256\trows"]
    for name, data in files.items():
        (root / folder / name).write_bytes(data)
    for name, data in listed.items():
        lines.append(f"{folder}/{name}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\t1")
    (root / MANIFEST).write_text("\n".join(lines) + "\n")


def test_a_file_shorter_than_the_manifest_says_is_refused(tmp_path, fedloom_cache):
    original = b"ticker,sector\nAAPL,Technology\nXOM,Energy\n"
    _with_manifest(tmp_path, "toy", {"sectors.csv": original[:20]}, {"sectors.csv": original})
    with pytest.raises(DataError, match=rf"toy/sectors\.csv has 20 bytes but .*MANIFEST\.tsv lists {len(original)}"):
        dataset_dir(tmp_path, "toy", ["sectors.csv"])


def test_a_changed_byte_fails_the_sha256(tmp_path, fedloom_cache):
    original = b"ticker,sector\nAAPL,Technology\nXOM,Energy\n"
    _with_manifest(tmp_path, "toy", {"sectors.csv": original.replace(b"XOM", b"XOX")}, {"sectors.csv": original})
    with pytest.raises(DataError, match=r"toy/sectors\.csv does not match its sha256 in .*MANIFEST\.tsv"):
        dataset_dir(tmp_path, "toy", ["sectors.csv"])


def test_a_verified_file_is_hashed_once(tmp_path, fedloom_cache, monkeypatch):
    original = b"ticker,sector\nAAPL,Technology\n"
    _with_manifest(tmp_path, "toy", {"sectors.csv": original}, {"sectors.csv": original})
    dataset_dir(tmp_path, "toy", ["sectors.csv"])
    assert (fedloom_cache / "data" / "verified.json").is_file()

    def no_hashing(*args: object) -> None:
        raise AssertionError("hashed again")

    monkeypatch.setattr(hashlib, "file_digest", no_hashing)
    dataset_dir(tmp_path, "toy", ["sectors.csv"])  # same size and mtime: the cached verdict


def test_an_edit_with_its_mtime_put_back_is_hashed_again_and_refused(tmp_path, fedloom_cache):
    original = b"ticker,sector\nAAPL,Technology\n"
    _with_manifest(tmp_path, "toy", {"sectors.csv": original}, {"sectors.csv": original})
    dataset_dir(tmp_path, "toy", ["sectors.csv"])  # verified, and remembered
    path = tmp_path / "toy" / "sectors.csv"
    before = path.stat()
    path.write_bytes(original.replace(b"AAPL", b"AAPX"))  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime restored: only the ctime tells
    with pytest.raises(DataError, match=r"toy/sectors\.csv does not match its sha256"):
        dataset_dir(tmp_path, "toy", ["sectors.csv"])


@shared
def test_the_shared_bundle_matches_its_manifest(fedloom_cache):
    for folder in ("acl18", "bigdata22"):
        dataset_dir(SHARED_DATA, folder, [])
    assert (
        str(SHARED_DATA.resolve() / "acl18" / "prices.csv") in (fedloom_cache / "data" / "verified.json").read_text()
    )


def test_any_table_with_a_repeated_date_and_instrument_is_refused(tmp_path):
    path = tmp_path / "panel.csv"
    path.write_text("date,instrument,target\n2021-01-04,A,0.1\n2021-01-04,B,0.2\n2021-01-04,A,0.3\n")
    with pytest.raises(DataError, match=r"'panel': 1 duplicated \(date, instrument\) rows, e\.g\. date=2021-01-04"):
        load_generic(None, GenericConfig(path=path))
