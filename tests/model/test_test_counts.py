"""Reading how many tests a runner ran from check output, and flagging a head that ran fewer (model/test_counts.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.model.test_counts import RUNNERS, Counts, compare, read_counts, runner_of

# ---------------------------------------------------------------- runner_of


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("pytest", "pytest"),
        ("pytest -q tests/test_calc.py", "pytest"),
        ("py.test -x", "pytest"),
        ("python -m pytest -q", "pytest"),
        ("python3 -m pytest", "pytest"),
        ("python3.11 -m pytest tests", "pytest"),
        (".venv/bin/python -m pytest", "pytest"),
        (".venv/bin/pytest -k 'not slow'", "pytest"),
        ("uv run pytest -q", "pytest"),
        ("uv run --frozen python -m pytest", "pytest"),
        ("poetry run pytest", "pytest"),
        ("FOO=1 pytest", "pytest"),
        ("FOO=1 BAR='a b' python -m pytest", "pytest"),
        ("env PYTHONPATH=src pytest", "pytest"),
        ("pip install -e . && pytest -q", "pytest"),
        ("cd sub; pytest 2>&1 | tail -5", "pytest"),
        ("go test ./...", "go"),
        ("go test -v -run TestAdd ./calc", "go"),
        ("CGO_ENABLED=0 go test ./...", "go"),
        ("go build ./... && go test ./...", "go"),
        ("cargo test", "cargo"),
        ("cargo test --workspace -- --nocapture", "cargo"),
        ("cargo +nightly test", "cargo"),
        ("cargo nextest run", "cargo"),
        ("jest", "jest"),
        ("npx jest --ci", "jest"),
        ("node_modules/.bin/jest", "jest"),
        ("vitest", "vitest"),
        ("vitest run", "vitest"),
        ("npx vitest run --reporter=verbose", "vitest"),
        ("pnpm exec vitest run", "vitest"),
    ],
)
def test_runner_of_a_known_runner(command: str, runner: str) -> None:
    assert runner_of(command) == runner


@pytest.mark.parametrize(
    "command",
    [
        "make test",
        "npm test",
        "yarn test",
        "pnpm test",
        "npm run test",
        "python test_calc.py",
        "python -c 'import pytest'",
        "python -m unittest",
        "go build ./...",
        "go vet ./...",
        "cargo build",
        "cargo nextest list",
        "tox -e py311",
        "echo pytest",
        "pytest '",  # no closing quotation: shlex cannot parse it
        "",
        "FOO=1",
    ],
)
def test_runner_of_anything_else_is_none(command: str) -> None:
    assert runner_of(command) is None


# ---------------------------------------------------------------- pytest

PYTEST_FULL = """\
============================= test session starts ==============================
platform linux -- Python 3.11.4, pytest-8.2.0, pluggy-1.5.0
rootdir: /tmp/calc
collected 6 items / 2 deselected / 4 selected

test_calc.py ..s.                                                        [100%]

================= 3 passed, 1 skipped, 2 deselected in 0.12s ==================
"""

PYTEST_FAILED_WITH_ERROR = """\
============================= test session starts ==============================
collected 3 items / 1 error

test_calc.py .F.                                                         [100%]

==================================== ERRORS ====================================
_________________________ ERROR at setup of test_db __________________________
E       fixture 'db' not found
=================================== FAILURES ===================================
___________________________________ test_div ___________________________________
E       ZeroDivisionError: division by zero
=============================== warnings summary ===============================
test_calc.py::test_add
  DeprecationWarning: old
=========================== short test summary info ============================
FAILED test_calc.py::test_div - ZeroDivisionError: division by zero
ERROR test_calc.py::test_db
============= 1 failed, 2 passed, 1 warning, 1 error in 0.30s ==============
"""

PYTEST_COLLECTION_ERROR = """\
==================================== ERRORS ====================================
________________________ ERROR collecting test_calc.py _________________________
E   ModuleNotFoundError: No module named 'calc'
!!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!
=============================== 2 errors in 0.05s ==============================
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (PYTEST_FULL, Counts(runner="pytest", passed=3, skipped=1, deselected=2)),
        (PYTEST_FAILED_WITH_ERROR, Counts(runner="pytest", passed=2, failed=1, errors=1)),
        (PYTEST_COLLECTION_ERROR, Counts(runner="pytest", errors=2)),
        ("..s.\n3 passed, 1 skipped in 0.02s\n", Counts(runner="pytest", passed=3, skipped=1)),  # -q
        ("F.\n1 failed, 1 passed in 0.02s\n", Counts(runner="pytest", passed=1, failed=1)),
        ("1 passed, 2 xfailed, 1 xpassed, 3 warnings in 0.05s", Counts(runner="pytest", passed=2, skipped=2)),
        ("=== 4 deselected in 0.01s ===", Counts(runner="pytest", deselected=4)),
        ("===== 2 passed in 61.02s (0:01:01) =====", Counts(runner="pytest", passed=2)),
        ("== 2 passed in 0.10 seconds ==", Counts(runner="pytest", passed=2)),  # pytest < 5.1
        ("============================ no tests ran in 0.01s =============================", Counts(runner="pytest")),
        ("no tests ran in 0.01s\n", Counts(runner="pytest")),  # -q
        ("1 warning in 0.01s", Counts(runner="pytest")),
    ],
)
def test_pytest_summaries(output: str, expected: Counts) -> None:
    assert read_counts("pytest", output) == expected


def test_pytest_reads_the_last_summary_line() -> None:
    output = "tests print this: 9 passed in 1.00s\n" + PYTEST_FULL + "\nrerun:\n== 1 passed in 0.01s ==\n"
    assert read_counts("pytest", output) == Counts(runner="pytest", passed=1)


def test_pytest_with_colors() -> None:
    output = "\x1b[32m==== \x1b[32m\x1b[1m3 passed\x1b[0m, \x1b[33m1 skipped\x1b[0m\x1b[32m in 0.02s\x1b[0m\x1b[32m ====\x1b[0m\n"
    assert read_counts("pytest", output) == Counts(runner="pytest", passed=3, skipped=1)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "5 tests collected in 0.01s\n",  # --collect-only -q: nothing ran
        "==== 5 tests collected in 0.01s ====",
        "ERROR: file or directory not found: tests/nope.py\n",
        "Traceback (most recent call last):\nModuleNotFoundError: No module named 'pytest'\n",
        "compiled 3 files in 0.5s",
    ],
)
def test_pytest_without_a_summary(output: str) -> None:
    assert read_counts("pytest", output) is None


# ---------------------------------------------------------------- go test

GO_VERBOSE = """\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestDiv
=== RUN   TestDiv/by_zero
    calc_test.go:20: want an error
=== RUN   TestDiv/by_one
--- FAIL: TestDiv (0.00s)
    --- FAIL: TestDiv/by_zero (0.00s)
    --- PASS: TestDiv/by_one (0.00s)
=== RUN   TestSlow
    calc_test.go:30: slow
--- SKIP: TestSlow (0.00s)
FAIL
FAIL\texample.com/calc\t0.002s
=== RUN   TestTrim
--- PASS: TestTrim (0.00s)
PASS
ok  \texample.com/calc/util\t0.001s
?   \texample.com/calc/cmd\t[no test files]
FAIL\texample.com/calc/broken [build failed]
FAIL
"""

GO_PLAIN = """\
ok  \texample.com/calc\t0.002s
?   \texample.com/calc/cmd\t[no test files]
ok  \texample.com/calc/util\t0.001s [no tests to run]
ok  \texample.com/calc/fmt\t(cached)
ok  \texample.com/calc/cover\t0.004s\tcoverage: 80.0% of statements
--- FAIL: TestParse (0.00s)
    parse_test.go:12: got 1, want 2
FAIL
FAIL\texample.com/calc/parse\t0.003s
FAIL
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (GO_VERBOSE, Counts(runner="go", passed=3, failed=2, skipped=1, errors=1)),
        # Without -v a package is one test: 3 packages passed, 1 failed, 1 ran nothing.
        (GO_PLAIN, Counts(runner="go", passed=3, failed=1)),
        ("ok  \texample.com/calc\t0.001s [no tests to run]\n", Counts(runner="go")),
        (
            "testing: warning: no tests to run\nPASS\nok  \texample.com/calc\t0.001s [no tests to run]\n",
            Counts(runner="go"),
        ),
        ("?   \texample.com/calc\t[no test files]\n", Counts(runner="go")),
        (
            "# example.com/calc\n./calc.go:3:1: syntax error\nFAIL\texample.com/calc [build failed]\n",
            Counts(runner="go", errors=1),
        ),
    ],
)
def test_go_summaries(output: str, expected: Counts) -> None:
    assert read_counts("go", output) == expected


def test_go_without_a_summary() -> None:
    assert read_counts("go", "go: cannot find main module, but found .git/config\n") is None


# ---------------------------------------------------------------- cargo

CARGO_TWO_BINARIES = """\
   Compiling calc v0.1.0 (/tmp/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.50s
     Running unittests src/lib.rs (target/debug/deps/calc-1a2b3c)

running 3 tests
test tests::add ... ok
test tests::slow ... ignored
test tests::div ... ok

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/integration.rs (target/debug/deps/integration-4d5e6f)

running 2 tests
test it_works ... ok
test it_fails ... FAILED

failures:

---- it_fails stdout ----
thread 'it_fails' panicked at tests/integration.rs:9:5

failures:
    it_fails

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 2 filtered out; finished in 0.01s

error: test failed, to rerun pass `--test integration`
"""


def test_cargo_sums_every_test_binary() -> None:
    assert read_counts("cargo", CARGO_TWO_BINARIES) == Counts(
        runner="cargo", passed=3, failed=1, skipped=1, deselected=2
    )


def test_cargo_doc_tests_with_nothing_to_run_add_nothing() -> None:
    output = "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
    assert read_counts("cargo", output) == Counts(runner="cargo")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "     Summary [   0.008s] 2 tests run: 1 passed, 1 failed, 0 skipped\n",
            Counts(runner="cargo", passed=1, failed=1),
        ),
        (
            "     Summary [   0.050s] 3 tests run: 3 passed (1 slow), 4 skipped\n",
            Counts(runner="cargo", passed=3, skipped=4),
        ),
        ("     Summary [   0.000s] 0 tests run: 0 passed, 0 skipped\n", Counts(runner="cargo")),
    ],
)
def test_cargo_nextest_summary(output: str, expected: Counts) -> None:
    assert read_counts("cargo", output) == expected


def test_cargo_that_did_not_compile() -> None:
    assert read_counts("cargo", "error[E0425]: cannot find value `x`\nerror: could not compile `calc`\n") is None


# ---------------------------------------------------------------- jest and vitest

JEST = """\
PASS src/sum.test.js
FAIL src/div.test.js
  ● div \u203a by zero

    expect(received).toThrow()

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 1 skipped, 2 todo, 3 passed, 7 total
Snapshots:   0 total
Time:        0.512 s
Ran all test suites.
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (JEST, Counts(runner="jest", passed=3, failed=1, skipped=3)),
        ("Test Suites: 1 passed, 1 total\nTests:       2 passed, 2 total\n", Counts(runner="jest", passed=2)),
        ("Test Suites: 1 failed, 1 total\nTests:       0 total\n", Counts(runner="jest")),
        (
            "\x1b[1mTests:\x1b[22m       \x1b[1m\x1b[32m4 passed\x1b[39m\x1b[22m, 4 total\n",
            Counts(runner="jest", passed=4),
        ),
        ("No tests found, exiting with code 1\n", None),
    ],
)
def test_jest_summaries(output: str, expected: Counts | None) -> None:
    assert read_counts("jest", output) == expected


VITEST_COLORED = (
    "\x1b[32m ✓\x1b[39m src/sum.test.ts \x1b[2m(\x1b[22m\x1b[2m4 tests\x1b[22m\x1b[2m | \x1b[22m\x1b[33m1 skipped\x1b[39m\x1b[2m)\x1b[22m\n"
    "\n"
    "\x1b[2m Test Files \x1b[22m \x1b[1m\x1b[32m1 passed\x1b[39m\x1b[22m\x1b[90m (1)\x1b[39m\n"
    "\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[32m3 passed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[33m1 skipped\x1b[39m\x1b[90m (4)\x1b[39m\n"
    "\x1b[2m   Start at \x1b[22m 10:00:00\n"
    "\x1b[2m   Duration \x1b[22m 312ms\x1b[2m (transform 20ms, setup 0ms, collect 15ms, tests 3ms)\x1b[22m\n"
)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (VITEST_COLORED, Counts(runner="vitest", passed=3, skipped=1)),
        (
            " Test Files  1 failed | 1 passed (2)\n      Tests  1 failed | 2 passed (3)\n",
            Counts(runner="vitest", passed=2, failed=1),
        ),
        ("      Tests  2 passed | 1 skipped | 2 todo (5)\n", Counts(runner="vitest", passed=2, skipped=3)),
        ("      Tests  no tests\n", Counts(runner="vitest")),
        ("No test files found, exiting with code 1\n", None),
    ],
)
def test_vitest_summaries(output: str, expected: Counts | None) -> None:
    assert read_counts("vitest", output) == expected


def test_an_unknown_runner_reads_nothing() -> None:
    assert read_counts("mocha", "3 passing (10ms)\n") is None


# ---------------------------------------------------------------- compare


def c(runner: str = "pytest", **counts: int) -> Counts:
    return Counts(runner=runner, **counts)


def test_ran_counts_passed_failed_and_errors() -> None:
    assert c(passed=3, failed=2, errors=1, skipped=7, deselected=9).ran == 6


@pytest.mark.parametrize(
    ("base", "head", "runner", "expected"),
    [
        (c(passed=5), c(passed=5), "pytest", []),
        (c(passed=5), c(passed=6), "pytest", []),
        (c(passed=5), c(passed=3), "pytest", ["pytest: 3 tests ran, 5 on the base"]),
        (c(passed=5), c(passed=1), "pytest", ["pytest: 1 test ran, 5 on the base"]),
        (c(passed=5), c(passed=4, failed=1), "pytest", []),
        (c(passed=5), c(passed=5, skipped=2), "pytest", ["pytest: 2 skipped, 0 on the base"]),
        (c(passed=5, skipped=1), c(passed=5), "pytest", []),
        (
            c(passed=5),
            c(passed=3, deselected=2),
            "pytest",
            ["pytest: 3 tests ran, 5 on the base", "pytest: 2 deselected, 0 on the base"],
        ),
        (c(passed=5), c(skipped=5), "pytest", ["pytest: no tests ran", "pytest: 5 skipped, 0 on the base"]),
        (c(passed=5), None, "pytest", ["pytest: no tests ran"]),
        (None, None, "go", []),  # no summary on either side (pytest -qq, say): nothing to compare
        (c(passed=3), None, "pytest", ["pytest: no tests ran"]),  # the base printed one, the head none
        (None, c("go"), "go", ["go: no tests ran"]),
        (None, c(passed=1), "pytest", []),
        (None, c(passed=1, skipped=10), "pytest", []),  # an unknown base compares nothing
        (None, None, None, []),  # an unknown runner: nothing to expect
        (c(passed=5), c(passed=1), None, ["pytest: 1 test ran, 5 on the base"]),
        (c("jest", passed=5), c("vitest", passed=1), "vitest", []),  # another runner: not comparable
    ],
)
def test_compare(base: Counts | None, head: Counts | None, runner: str | None, expected: list[str]) -> None:
    assert compare(base, head, runner) == expected


def test_compare_read_outputs() -> None:
    base = read_counts("cargo", CARGO_TWO_BINARIES)
    head = read_counts(
        "cargo", "test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s"
    )
    assert compare(base, head, runner_of("cargo test")) == ["cargo: 2 tests ran, 4 on the base"]


counts = st.builds(
    Counts,
    runner=st.sampled_from(RUNNERS),
    passed=st.integers(0, 10**6),
    failed=st.integers(0, 10**6),
    skipped=st.integers(0, 10**6),
    deselected=st.integers(0, 10**6),
    errors=st.integers(0, 10**6),
)


@given(counts.filter(lambda x: x.ran > 0))
def test_a_run_like_the_base_flags_nothing(run: Counts) -> None:
    assert compare(run, run, run.runner) == []
