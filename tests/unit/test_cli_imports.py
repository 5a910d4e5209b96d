"""The CLI's listing commands stay light: printing help, methods, the config schema or the datasets
loads none of the tensor stack (torch, transformers, flwr), which only running something needs; and a
run loads none of the libraries only some runs use (reports, plots, clustering, trackers)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "flwr")
ON_USE = ("scipy.stats", "matplotlib", "rouge_score", "sklearn", "mlflow", "lightgbm", "xgboost", "catboost")


def heavy_modules_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``heavy`` modules in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli(*argv: str) -> str:
    """Code that runs ``fedloom ARGV`` in process, its output discarded."""
    return (
        "import contextlib, io, sys\nfrom fedloom.cli import main\n"
        f"sys.argv = ['fedloom', *{list(argv)!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main()"
    )


@pytest.mark.parametrize(
    "argv", [["--help"], ["methods"], ["config"], ["config", "--set", "methods.rpa.prototypes=2"], ["data", "list"]]
)
def test_listing_commands_import_no_tensor_stack(argv: list[str]):
    assert heavy_modules_after(cli(*argv)) == []


def test_the_schema_and_method_names_import_no_tensor_stack():
    code = (
        "from fedloom.runs.config import RunConfig, load_config\n"
        "from fedloom.algorithms.registry import METHODS\n"
        "RunConfig.model_json_schema(); load_config(None, {'method': 'rpa'}); sorted(METHODS)"
    )
    assert heavy_modules_after(code) == []


def test_the_probe_sees_a_heavy_import():
    """The check can fail: an algorithm module itself does load torch."""
    assert "torch" in heavy_modules_after("import fedloom.algorithms.fedavg")


def test_a_run_imports_only_what_every_run_needs():
    """`fedloom run` imports these two modules; a Spearman ρ, a plot, a clustering or a tracker is
    imported where a run uses it (issue 21: start-up)."""
    code = "import fedloom.runs.llm, fedloom.runs.reference"
    assert heavy_modules_after(code, ON_USE) == []
    assert heavy_modules_after("import fedloom.runs.plots", ON_USE) == ["matplotlib"]  # the probe can fail
