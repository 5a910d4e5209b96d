"""Each bad input of the hostile / careless-user battery ends in one line and exit status 2, never a
traceback: a config that is not UTF-8, nested past the recursion limit, a suite that is an alias bomb,
a .gguf that is not one, a garbage adapter, a non-numeric price, a sectors file cut short, a private
key where a public one belongs; and `fedloom table` / `report` skip a broken run by name."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from fedloom.cli import main
from fedloom.errors import ConfigError
from fedloom.runtime.flower.identity import public_key
from tests.conftest import SHARED_DATA
from tests.integration.cli_check import TINY, fails

pytestmark = pytest.mark.integration
shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("rounds: 3\nname: caf\xe9\n".encode("latin-1"), "not UTF-8 text"),
        (("[" * 3000 + "]" * 3000).encode(), "nested too deeply"),
        (b"a: &a [1, 1]\nb: *a\n", "aliases (*name) are not allowed"),
    ],
)
def test_a_config_file_that_cannot_be_read_is_one_line(tmp_path, monkeypatch, capsys, content, message):
    (tmp_path / "bad.yaml").write_bytes(content)
    assert message in fails(["run", "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "r")],
                            monkeypatch, capsys)  # fmt: skip


def test_a_suite_alias_bomb_is_refused_before_it_expands(tmp_path, monkeypatch, capsys):
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]  # 9^9 strings expanded
    (tmp_path / "bomb.yaml").write_text("name: bomb\nmethods: [fedavg]\n" + "\n".join(lines) + "\n")
    err = fails(["suite", str(tmp_path / "bomb.yaml"), "--dry-run"], monkeypatch, capsys)
    assert "aliases (*name) are not allowed" in err


def test_a_gguf_that_is_not_one_and_a_garbage_adapter_are_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "fake.gguf").write_text("not a model")
    err = fails(["run", "--out", str(tmp_path / "a"), *TINY, "--backbone", str(tmp_path / "fake.gguf")],
                monkeypatch, capsys)  # fmt: skip
    assert "is not a GGUF file" in err
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 16,
                                                             "target_modules": ["q_proj", "v_proj"]}))  # fmt: skip
    (adapter / "adapter_model.safetensors").write_bytes(b"garbage")
    err = fails(["run", "--out", str(tmp_path / "b"), *TINY, "--init-adapter", str(adapter)], monkeypatch, capsys)
    assert "is not a readable PEFT adapter" in err


def test_a_private_key_listed_as_an_identity_is_named_without_its_content(tmp_path):
    key = tmp_path / "owner0"
    key.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    with pytest.raises(ConfigError, match="is a private key; list the owner's public key") as refused:
        public_key(str(key), "technology")
    assert "b3BlbnNz" not in str(refused.value)


def _acl18_with(tmp_path: Path, **files: str) -> Path:
    """ACL18's folder with some files replaced (no manifest: nothing but the loader checks them)."""
    folder = tmp_path / "data" / "acl18"
    folder.mkdir(parents=True)
    for name in ("prices.csv", "tweets.jsonl", "sectors.csv"):
        if name.replace(".", "_") in files:
            (folder / name).write_text(files[name.replace(".", "_")])
        else:
            (folder / name).symlink_to(SHARED_DATA / "acl18" / name)
    return tmp_path / "data"


@shared
def test_a_non_numeric_price_and_a_sectors_file_cut_short_are_one_line(tmp_path, monkeypatch, capsys):
    prices = (SHARED_DATA / "acl18" / "prices.csv").read_text().splitlines()
    fields = prices[5].split(",")
    fields[5] = "1.2.3"
    data = _acl18_with(tmp_path / "p", prices_csv="\n".join([*prices[:5], ",".join(fields), *prices[6:]]) + "\n")
    err = fails(["data", "info", "acl18", "--data-dir", str(data)], monkeypatch, capsys)
    assert "prices.csv: line 6: column 'close' is not a number" in err
    sectors = (SHARED_DATA / "acl18" / "sectors.csv").read_text().splitlines()
    data = _acl18_with(tmp_path / "s", sectors_csv="\n".join(sectors[: len(sectors) // 2]) + "\n")
    err = fails(["data", "info", "acl18", "--data-dir", str(data), "--set", "data.max_dates_per_split=3"],
                monkeypatch, capsys)  # fmt: skip
    assert "sectors.csv has no sector for tickers" in err


def test_table_and_report_skip_a_broken_run_by_name_and_show_the_rest(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setattr(sys, "argv", ["fedloom", "run", "--out", str(tmp_path / "runs" / "good"), *TINY])
    main()
    breaks = {"truncated": lambda d: (d / "summary.json").write_text((d / "summary.json").read_text()[:40]),
              "empty": lambda d: (d / "summary.json").write_text("{}"),
              "cut": lambda d: (d / "metrics.jsonl").write_text((d / "metrics.jsonl").read_text()[:-30])}  # fmt: skip
    for name, brk in breaks.items():
        shutil.copytree(tmp_path / "runs" / "good", tmp_path / "runs" / name)
        brk(tmp_path / "runs" / name)
    capsys.readouterr()
    for argv in (
        ["table", str(tmp_path / "runs")],
        ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "page")],
    ):
        monkeypatch.setattr(sys, "argv", ["fedloom", *argv])
        main()
        captured = capsys.readouterr()
        for name in breaks:  # a WARNING line each on stderr (the CLI's logging)
            assert f"skipped {tmp_path / 'runs' / name}: not a readable run" in caplog.text
        assert "Traceback" not in captured.err
        caplog.clear()
    assert (tmp_path / "page" / "report.html").is_file()
