"""Typed configs, workspaces, run directories and reports."""
