"""Shared pytest setup. Keep this minimal: test modules live in several places under tests/.

- tests.lab.fixtures: the lab fixtures (tests/lab/README.md)
- tests.lab.lanes: which tests run side by side under pytest-xdist, and in what order
- tests.lab.report: where the time went, printed at the end of the run
- pytester: for the tests of those plugins
"""

pytest_plugins = ["tests.lab.fixtures", "tests.lab.lanes", "tests.lab.report", "pytester"]
