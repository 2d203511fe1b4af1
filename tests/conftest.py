"""Shared pytest setup. Keep this minimal: test modules live in several places under tests/.

- tests.lab.fixtures: the lab fixtures (tests/lab/README.md)
- tests.lab.lanes: which tests run side by side under pytest-xdist, and in what order
- tests.lab.report: where the time went, printed at the end of the run
- tests.lab.skips: every skip reason with its count; unexpected ones fail scripts/test
- pytester: for the tests of those plugins
"""

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.lab.fixtures", "tests.lab.lanes", "tests.lab.report", "tests.lab.skips", "pytester"]


# Property tests judge behaviour, never speed: on a loaded 2-core CI machine one example of a
# fast parser took 255 ms against Hypothesis's default 200 ms deadline. Speed is measured in
# bench/, not asserted here.
settings.register_profile("hostcheck", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("hostcheck")
