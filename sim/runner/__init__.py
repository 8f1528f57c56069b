"""Scenario -> simulation -> result record."""
