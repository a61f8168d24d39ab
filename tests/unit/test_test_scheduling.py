"""How `make test`'s workers get their tests (tests/support/scheduling.py): the slow kinds first, and a
module that shares a fixture wider than a test as one unit, so that fixture starts once."""

from __future__ import annotations

import random

from tests.support.scheduling import kind_rank, shares_a_fixture


def test_slow_modules_then_end_to_end_tests_go_out_first_and_unit_tests_last_in_their_random_order() -> None:
    ids = [f"tests/{kind}/test_{kind}_{i}.py::test_{i}" for kind in ("unit", "docs", "integration", "e2e")
           for i in range(3)]  # fmt: skip
    slow = "tests/unit/test_docker_image.py::test_the_install_step_yields_a_working_shoal_outside_the_source_tree"
    ids.append(slow)  # a unit test, marked slow: a whole pip install
    random.Random(7).shuffle(ids)
    ordered = sorted(ids, key=kind_rank)
    assert ordered[0] == slow
    kinds = [nodeid.split("/")[1] for nodeid in ordered[1:]]
    assert kinds == ["e2e"] * 3 + ["integration"] * 3 + ["docs"] * 3 + ["unit"] * 3
    assert [n for n in ordered if "/e2e/" in n] == [n for n in ids if "/e2e/" in n]  # the shuffle kept within a kind


def test_a_module_with_a_module_scoped_fixture_is_one_unit_of_work() -> None:
    assert shares_a_fixture("tests/integration/test_rest_csrf.py")  # its gateway: scope="module"
    assert shares_a_fixture("tests/e2e/test_faults.py")  # its own Redis, ZooKeeper and broker
    assert not shares_a_fixture("tests/unit/test_metrics.py")
    assert not shares_a_fixture("tests/unit/no_such_module.py")
