"""Errors quote what the user sent, bounded: a 100 KB value is not echoed whole."""

import pytest

from hub_ext.core.errors import UserInputError, http_answer

pytestmark = pytest.mark.unit


def test_a_huge_value_is_cut_in_the_field_and_the_message():
    value = "v" * 100_000
    e = UserInputError(f"data.{value}", f"unknown project {value!r}")
    assert len(e.field) < 250 and e.field.endswith("(99805 more characters)")
    assert len(e.message) < 1050 and "more characters)" in e.message
    status, text = http_answer(e)
    assert status == 400 and len(text) < 1300


def test_ordinary_errors_are_kept_whole():
    e = UserInputError("trainingInput.scaleTier", "must be one of BASIC, BASIC_GPU, STANDARD_1, PREMIUM_1, CUSTOM")
    assert str(e) == "trainingInput.scaleTier: must be one of BASIC, BASIC_GPU, STANDARD_1, PREMIUM_1, CUSTOM"
