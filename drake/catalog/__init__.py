"""Declarations of every benchmark the suite knows: data, not code."""
