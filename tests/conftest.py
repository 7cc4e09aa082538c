import os

# Installed plug-ins are off in the tests (before anything loads a registry): a package installed
# beside relgrade must not change what the suite checks. tests/test_plugins.py turns them on
# in the subprocesses that check the switch.
os.environ["RELGRADE_LOAD_PLUGINS"] = "0"

from hypothesis import settings

from tests.fixtures_env import llm_env  # noqa: F401
from tests.fixtures_fakeserver import _fake_server_session, fake_server  # noqa: F401
from tests.helpers.batch_api import batch_server  # noqa: F401
from tests.helpers.hypothesis_scale import CI_EXAMPLES

# Hypothesis profiles: `dev` (the default, few examples: the quick loop) and `ci` (selected when
# CI=true, as .ci/run sets it: every property at full strength). HYPOTHESIS_PROFILE overrides.
settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None)
settings.register_profile("dev", max_examples=10, deadline=None)
_ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if _ci else "dev"))
