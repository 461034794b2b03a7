"""Benchmarks across papers: ``solvers`` (every plug-in on the same problems), ``mechanisms``
(the registry's mechanisms and the engine's seams on one tree)."""
