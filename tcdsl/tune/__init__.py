"""Autotuning: find mapping options and schedule choices, record them, reuse them.

The four roles, one module each: ``space`` (what can vary), ``search`` (the
strategy), ``measure`` and ``rpc`` (builder and runners), ``database``
(records in, best out); ``tuner`` runs them, ``reuse`` serves the options to
``tcdsl.compile``, ``workload`` keeps option sets for a workload and the
dispatch rule between them, ``cli`` is ``tcdsl tune``.  See docs/tuning.md.
"""
from __future__ import annotations

__all__ = ["autotune", "TuneResult"]


def __getattr__(name: str):
    # imported on first use: `tcdsl --help` and tcdsl.compile need none of it
    if name in __all__:
        from . import tuner

        return getattr(tuner, name)
    raise AttributeError(f"module 'tcdsl.tune' has no attribute {name!r}")
