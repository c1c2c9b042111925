"""Set-up shared by the checks of weights/'s package (tests/weights/check_*.py): put weights/ on the
import path, so that `denoise_train` imports, and skip the check (exit 77, automake's convention,
as tests/run_tests.sh counts it) when python3 cannot import a module it needs.
"""
import importlib
import os
import sys

WEIGHTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "weights")
SKIP = 77


def need(*modules: str) -> None:
    """Exit 77 unless every module imports; then make weights/ importable."""
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            print(f"skipped: python3 cannot import {m} ({e})")
            sys.exit(SKIP)
    if WEIGHTS not in sys.path:
        sys.path.insert(0, WEIGHTS)
