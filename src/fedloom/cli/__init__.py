"""``fedloom`` command line: one small module per command group, each a thin layer that parses options,
calls the library and prints (`fedloom.runs` makes runs, `fedloom.results` reads them, `fedloom.suites`
runs grids of them, `fedloom.apps` deploys them on Flower)."""

from fedloom.cli import deploy, info, params, results, run, suite  # noqa: F401  (each module registers its commands)
from fedloom.cli.app import app, main

__all__ = ["app", "main"]
