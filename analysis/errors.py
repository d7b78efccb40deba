"""Errors of the analysis package; all are ``proxy.InfertapError`` so a CLI catches one base.

InfertapError
├── CaptureError           (from proxy) a capture that can't be read: corrupt, unknown version
└── AnalysisError          analysis could not do what was asked
    ├── NoCapturesError    an argument named no capture
    └── QueryError         a SQL query failed (DuckDB's message, verbatim)
"""

from __future__ import annotations

from infertap.errors import InfertapError


class AnalysisError(InfertapError):
    pass


class NoCapturesError(AnalysisError):
    pass


class QueryError(AnalysisError):
    pass
