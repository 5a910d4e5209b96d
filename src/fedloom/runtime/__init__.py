"""Runtimes that carry algorithm messages: the in-process simulation (the default) and Flower
(`fedloom.runtime.flower`: its simulation engine and SuperLink / SuperNode deployment)."""
