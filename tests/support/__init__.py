"""Test helpers shared by the unit, integration and e2e suites: launchers and `wait_until`."""
