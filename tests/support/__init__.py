"""What the tests share besides fixtures: constants, helpers, relays and the scripts the tests
run as processes. Test modules import from here and from nowhere else in ``tests`` (fixtures
come by name from the ``conftest.py`` files); ``make lint`` checks it (pyproject.toml)."""
