"""Conformance checks for plug-ins: the tests relgrade runs on its own measures and judges, for a
plug-in author to run on theirs.

>>> from relgrade.testing import check_judge, check_measure
>>> check_measure("ToyRBP")          # doctest: +SKIP
>>> check_judge("toylen")            # doctest: +SKIP

Each raises AssertionError saying what the plug-in gets wrong, and returns nothing when it
conforms. Call them from a test of your package (pytest shows the message):

- `check_measure(name, params=None)`: for the registered measure `name`, on random graded
  lists, at each threshold, cutoff, gain and `judged_only` it takes: the list function equals
  the vectorised function per query; the cutoff is honoured (nothing ranked below k changes a
  value at @k); a name parses and prints back to itself.
- `check_judge(kind, settings)`: two builds of the judge kind `kind` from the same settings have
  the same fingerprint (so a rerun finds the stored answers), and a judgment comes back under
  the key it was asked with, for the pair it was asked about.

relgrade's own suite runs both over everything registered (tests/test_plugin_conformance.py).
Installed plug-ins load here as they do in the commands (`RELGRADE_LOAD_PLUGINS`).
"""

from relgrade.testing.judges import check_judge
from relgrade.testing.measures import check_measure

__all__ = ["check_judge", "check_measure"]
