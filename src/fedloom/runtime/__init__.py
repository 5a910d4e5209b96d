"""Runtimes that carry algorithm messages: the in-process simulation (default) and, later, Flower."""
