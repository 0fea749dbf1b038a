"""The hub's platform API with a callable (async) ``profile_list`` in a real hub: ``projects`` and
``catalog`` call it for the user asked about, as the spawn form does, so each user's catalogue
lists the profiles the function gave them (the jobs API plans with these answers); a result with
a problem is answered 500 naming the path at fault."""

import pytest
import requests

from tests.hub.test_local_platform import _user_token
from tests.hub.test_z2jh_callable_profiles import hub  # noqa: F401 (the fixture: a hub with PER_USER)

pytestmark = pytest.mark.hub


def get(hub, user: str, what: str, token: str) -> requests.Response:
    return requests.get(f"{hub.api_url}/mlplatform/users/{user}/{what}", timeout=30,
                        headers={"Authorization": f"token {token}"})


def test_the_platform_api_lists_each_users_own_profiles(hub):  # noqa: F811
    hub, _ = hub
    answers = {}
    for user in ("alice", "bob", "mallory"):
        assert hub.api("POST", f"/users/{user}").status_code in (201, 409)  # the demo config has alice, bob
        token = _user_token(hub, user)
        answers[user] = {what: get(hub, user, what, token) for what in ("catalog", "projects")}

    for user, slugs in (("alice", ["cpu"]), ("bob", ["big", "cpu"])):
        catalog, projects = answers[user]["catalog"], answers[user]["projects"]
        assert catalog.status_code == 200 and projects.status_code == 200, (catalog.text, projects.text)
        assert sorted(p["slug"] for p in catalog.json()["profiles"]) == slugs
        cpu = next(p for p in catalog.json()["profiles"] if p["slug"] == "cpu")
        assert cpu["description"] == f"Made for {user}"
        assert cpu["options"] == [{"name": "flavour", "display_name": "Flavour", "choices": ["plain", "lab"],
                                   "unlisted": False}]
        assert {a["name"] for a in catalog.json()["accelerators"]} >= {"1g.5gb"}
        personal = projects.json()["projects"][0]
        assert personal["personal"] and sorted(personal["profiles"]) == slugs

    for what in ("catalog", "projects"):
        r = answers["mallory"][what]
        assert r.status_code == 500, r.text
        assert "the hub's profile list for 'mallory' is invalid: profile_list(spawner)[0].kubespawner_override." \
               "cpu_limit: " in r.json()["message"]
