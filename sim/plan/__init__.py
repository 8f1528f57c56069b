"""Cluster design: enumerate parallel layouts, estimate, simulate the best, report.

Entry point: :func:`moesim.plan.design.design` (``moesim design``); the pieces alone are
``moesim plan accounting | memory | layouts``.
"""
