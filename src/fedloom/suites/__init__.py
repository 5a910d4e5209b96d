"""Suites: grids of runs, run as `fedloom run` subprocesses."""
