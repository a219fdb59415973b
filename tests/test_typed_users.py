"""A user as people type it (``--user``): ``names.match_user``'s one rule, rule by rule."""

from __future__ import annotations

import pytest

from sessiontape.storage.names import AmbiguousUserError, match_user

USERS = ["carol@example.com", "Dave@Example.com", "erin", "Frank Jones", "gus@a.org",
         "gus@b.org"]


@pytest.mark.parametrize("typed, meant", [
    ("carol@example.com", "carol@example.com"),  # the exact id
    ("CAROL@Example.COM", "carol@example.com"),  # case ignored
    ("carol", "carol@example.com"),              # the part before '@'
    ("dave", "Dave@Example.com"),                # ... case ignored too
    ("carol_example_com", "carol@example.com"),  # its log folder's name
    ("Frank_Jones", "Frank Jones"),
    ("frank_jones", "Frank Jones"),
    ("ERIN", "erin"),
    ("gus@a.org", "gus@a.org"),
    ("zed", "zed"),                              # no such user: as typed (nothing matches)
])
def test_a_user_is_matched_as_typed(typed: str, meant: str) -> None:
    assert match_user(typed, USERS) == meant


def test_the_first_rule_that_matches_decides() -> None:
    """An exact id wins over another user's local part, a case-insensitive one too."""
    assert match_user("carol", ["carol", "carol@example.com"]) == "carol"
    assert match_user("Carol", ["carol", "carol@example.com"]) == "carol"
    assert match_user("Carol", ["carol", "Carol@x.org"]) == "carol"


def test_a_short_form_of_several_users_is_refused_with_them() -> None:
    with pytest.raises(AmbiguousUserError) as raised:
        match_user("gus", USERS)
    assert raised.value.users == ["gus@a.org", "gus@b.org"]
    assert str(raised.value) == "'gus' means several users; give one of them"
    with pytest.raises(AmbiguousUserError) as raised:
        match_user("ann", ["Ann", "ANN"])
    assert raised.value.users == ["ANN", "Ann"]
