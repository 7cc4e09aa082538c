"""Conformance checks for plug-ins: the tests relgrade runs on its own measures and judges, for a
plug-in author to run on theirs.

>>> from relgrade.testing import check_judge, check_measure
>>> check_measure("ToyRBP")          # doctest: +SKIP
>>> check_judge("toylen")            # doctest: +SKIP

Each raises AssertionError saying what the plug-in gets wrong (call them from a test of your
package): `check_measure` on random graded lists, `check_judge` on one pair; their docstrings say
what they check.

relgrade's own suite runs both over everything registered (tests/test_plugin_conformance.py).
Installed plug-ins load here as they do in the commands (`RELGRADE_LOAD_PLUGINS`).
"""

from relgrade.testing.judges import check_judge
from relgrade.testing.measures import check_measure

__all__ = ["check_judge", "check_measure"]
