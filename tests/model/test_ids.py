"""Ids: generation (length, time order, uniqueness), validation and prefix resolution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import Ambiguous, BadInput, NotFound
from gitswarm.model.ids import (
    ALPHABET,
    GENERATED_ID,
    MAX_LISTED,
    check_job_id,
    check_task_id,
    new_id,
    resolve_prefix,
    split_task_ref,
)

NOW = 1_700_000_000.0


def _time_part(generated: str) -> int:
    value = 0
    for char in generated[:10]:
        value = value * 32 + ALPHABET.index(char)
    return value


# -- new_id ---------------------------------------------------------------------------


def test_new_id_is_26_chars_of_lowercase_crockford_base32() -> None:
    for generated in (new_id(), new_id(NOW), new_id(0.0)):
        assert len(generated) == 26
        assert GENERATED_ID.fullmatch(generated)
        assert set(generated) <= set(ALPHABET)
        assert check_job_id(generated) == generated


def test_new_id_encodes_the_millisecond_timestamp_first() -> None:
    assert _time_part(new_id(NOW)) == int(NOW * 1000)
    assert new_id(0.0).startswith("0" * 10)


def test_new_id_sorts_by_time() -> None:
    times = [NOW, NOW + 0.002, NOW + 1, NOW + 60, NOW + 3600, NOW + 86400 * 365]
    ids = [new_id(t) for t in times]
    assert sorted(ids) == ids
    assert sorted(new_id(t) for t in reversed(times))[0][:10] == ids[0][:10]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**45), min_size=2, max_size=20, unique=True))
def test_ids_made_with_increasing_now_sort_in_that_order(millis: list[int]) -> None:
    # whole milliseconds plus half a millisecond, so float rounding cannot move a value across a boundary
    millis.sort()
    ids = [new_id((m + 0.5) / 1000) for m in millis]
    assert sorted(ids) == ids
    assert [_time_part(i) for i in ids] == millis


def test_new_id_is_unique_even_within_one_millisecond() -> None:
    ids = [new_id(NOW) for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert len({i[:10] for i in ids}) == 1


def test_new_id_without_now_uses_the_clock() -> None:
    import time

    before = int(time.time() * 1000)
    generated = new_id()
    after = int(time.time() * 1000)
    assert before <= _time_part(generated) <= after


# -- check_task_id --------------------------------------------------------------------


@pytest.mark.parametrize(
    "task_id",
    ["a", "0", "lint", "unit-tests", "build_1", "a.b", "v1.2.3", "a" * 64, "x-" * 32, "lock", "a.locked", "9lives"],
)
def test_check_task_id_accepts(task_id: str) -> None:
    assert check_task_id(task_id) == task_id


@pytest.mark.parametrize(
    "task_id",
    [
        "",
        "..",
        "a..b",
        "../x",
        "a/b",
        "/a",
        "a/",
        "A",
        "Lint",
        "lInt",
        "a.lock",
        "x.lock",
        "a.",
        ".a",
        "-a",
        "_a",
        "a" * 65,
        "a b",
        "a\nb",
        "é",
        "a\\b",
        "a:b",
        "a~1",
    ],
)
def test_check_task_id_refuses(task_id: str) -> None:
    with pytest.raises(BadInput) as info:
        check_task_id(task_id, "tasks[3].id")
    assert str(info.value).startswith("tasks[3].id: invalid task id ")
    assert repr(task_id) in str(info.value)


def test_check_task_id_length_limit_is_64() -> None:
    assert check_task_id("a" * 64)
    with pytest.raises(BadInput):
        check_task_id("a" * 65)


@pytest.mark.parametrize("job_id", ["", "01abc", "0" * 25, "0" * 27, "0" * 25 + "u", "0" * 25 + "A", "../" + "0" * 23])
def test_check_job_id_refuses(job_id: str) -> None:
    with pytest.raises(BadInput):
        check_job_id(job_id)


# -- resolve_prefix -------------------------------------------------------------------

JOBS = ["01aaaa", "01aabb", "01bbbb", "02cccc"]


def test_resolve_prefix_exact_match() -> None:
    assert resolve_prefix("01bbbb", JOBS, "job") == "01bbbb"


def test_resolve_prefix_exact_match_wins_over_longer_candidates() -> None:
    assert resolve_prefix("abc", ["abcd", "abc", "abce"], "job") == "abc"


def test_resolve_prefix_unique_prefix() -> None:
    assert resolve_prefix("02", JOBS, "job") == "02cccc"
    assert resolve_prefix("01b", JOBS, "job") == "01bbbb"


def test_resolve_prefix_none_raises_not_found() -> None:
    with pytest.raises(NotFound) as info:
        resolve_prefix("03", JOBS, "job")
    assert str(info.value) == "no job matches '03'"


def test_resolve_prefix_no_candidates_raises_not_found() -> None:
    with pytest.raises(NotFound):
        resolve_prefix("01", [], "artifact")


def test_resolve_prefix_ambiguous_lists_candidates() -> None:
    with pytest.raises(Ambiguous) as info:
        resolve_prefix("01a", JOBS, "job")
    assert str(info.value) == "job id '01a' is ambiguous: 01aaaa, 01aabb"
    assert isinstance(info.value, BadInput)


def test_resolve_prefix_ambiguous_lists_at_most_a_few() -> None:
    many = [f"0{n:02d}x" for n in range(MAX_LISTED + 3)]
    with pytest.raises(Ambiguous) as info:
        resolve_prefix("0", reversed(many), "task")
    message = str(info.value)
    assert message.startswith("task id '0' is ambiguous: " + ", ".join(many[:MAX_LISTED]))
    assert message.endswith(" and 3 more")


@pytest.mark.parametrize("prefix", ["", "..", "../x", "a/b", "ABC", "-x", ".x", "a..b"])
def test_resolve_prefix_refuses_invalid_prefix_before_matching(prefix: str) -> None:
    with pytest.raises(BadInput) as info:
        resolve_prefix(prefix, ["../x", "a/b", "ABC", "a..b"], "job")
    assert not isinstance(info.value, (NotFound, Ambiguous))
    assert str(info.value) == f"invalid job id {prefix!r}"


# -- split_task_ref -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("lint", (None, "lint")),
        ("01abc/lint", ("01abc", "lint")),
        ("01m8va8phpsfsebf4x0dz68g1q/unit-tests", ("01m8va8phpsfsebf4x0dz68g1q", "unit-tests")),
        ("0/a.b", ("0", "a.b")),
    ],
)
def test_split_task_ref(ref: str, expected: tuple[str | None, str]) -> None:
    assert split_task_ref(ref) == expected


@pytest.mark.parametrize(
    "ref",
    ["", "/", "a/b/c", "JOB/x", "01abc/../x", "../x", "x/..", "01abc/", "/lint", "01abc/Lint", "01abc/a.lock", "..", "a b"],
)
def test_split_task_ref_refuses(ref: str) -> None:
    with pytest.raises(BadInput):
        split_task_ref(ref)
