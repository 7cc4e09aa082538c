"""Example counts that follow the hypothesis profile (`tests/conftest.py`).

A property test written with `@settings(max_examples=examples(300))` draws 300 examples under
the `ci` profile (max_examples 100, CI=true) and a tenth as many, at most 10, under `dev`
(max_examples 10), the quick loop's default.
"""

from __future__ import annotations

from hypothesis import settings

CI_EXAMPLES = 100
"""max_examples of the `ci` profile: the scale at which counts given to `examples` are meant."""


DEV_CEILING = 10
"""The most examples a test draws under a profile below `ci`'s."""


def examples(n: int) -> int:
    """`n` examples scaled by the loaded profile's max_examples (at least 5; at most
    `DEV_CEILING` under a profile below `ci`'s)."""
    scale = settings().max_examples
    scaled = max(5, n * scale // CI_EXAMPLES)
    return scaled if scale >= CI_EXAMPLES else min(scaled, DEV_CEILING)
