from tests.fixtures_fakeserver import _fake_server_session, fake_server  # noqa: F401
