"""Federated methods: one module per method family over one protocol (`base.Algorithm`)."""
