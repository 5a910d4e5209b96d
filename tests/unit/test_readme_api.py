"""The README's Python API example runs as written (in a fresh folder) and gives what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_api_example_runs_as_written(tmp_path, monkeypatch):
    section = README.read_text().split("### Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "README has no Python API example"
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), "README.md", "exec"), {})
    assert (tmp_path / "runs" / "api-demo" / "summary.json").is_file()
    out = printed.getvalue()
    assert "fedavg" in out and "train_loss" in out and "rank_ic" in out
