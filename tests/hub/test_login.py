"""Logging in through a real OpenID Connect provider (npm oidc-provider) and a GitHub stand-in into
real hubs, with plain HTTP following the real redirects: groups from the provider become the
platform's projects and profiles, are refreshed before every spawn, and the advisories' classes
of login bugs stay closed (XSRF, open redirect, other users' servers and APIs, unbounded log
lines, unverified email, wrong hosted domain). One provider and four hubs (generic OIDC with
``preferred_username``, generic OIDC with ``email`` as the username, Google pointed at the provider,
GitHub pointed at the stand-in) serve the whole module; misconfigured hubs start on their own."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from hub_ext.login.rules.settings import NOT_ALLOWED, Endpoints
from tests.harness.github_api import GitHubAPI
from tests.harness.hub import HubProcess
from tests.harness.oidc import OIDCProvider, browse, client, form_action, oidc_login
from tests.harness.oidc_hubs import PASSWORD, hub_env, login_hub_source, user

pytestmark = pytest.mark.hub

HUGE = "x" * 1_000_000
MAIL = {"email_verified": True, "verified_email": True}
USERS = {
    "alice": user(["vision"], preferred_username="alice", email="alice@example.org", **MAIL),
    "bob": user(["research"], preferred_username="bob", email="bob@example.org", **MAIL),
    "erin": user(["vision", "research"], preferred_username="erin", email="erin@example.org", **MAIL),
    "carol": user(["ml-admins"], preferred_username="carol", email="carol@example.org", **MAIL),
    "mallory": user(["contractors"], preferred_username="mallory", email="mallory@example.org", **MAIL),
    "huge": user(["vision"], preferred_username=HUGE, email="huge@example.org", **MAIL),
    # Google-shaped accounts (the Google hub reads email, verified_email and hd)
    "gina": user(["vision"], email="gina@example.org", hd="example.org", **MAIL),
    "faker": user(["vision"], email="faker@example.org", hd="evil.example", **MAIL),
    "nohd": user(["vision"], email="nohd@example.org", **MAIL),
    "unverified": user(["vision"], email="unverified@example.org", hd="example.org", email_verified=False,
                       verified_email=False),
    # for the generic OIDC hub whose usernames are email addresses
    "vera": user(["vision"], preferred_username="vera", email="vera@example.org", email_verified=True),
    "ursula": user(["vision"], preferred_username="ursula", email="ursula@example.org", email_verified=False),
    "nina": user(["vision"], preferred_username="nina", email="nina@example.org"),  # no email_verified at all
}
GITHUB_USERS = {
    "octo": {"password": PASSWORD, "id": 1, "name": "Octo", "email": None, "orgs": ["acme"],
             "teams": {"acme": ["vision"]}},
    "stranger": {"password": PASSWORD, "id": 2, "name": "Stranger", "email": None, "orgs": ["other", "ml-admins"], "teams": {}},
}
COMMON = {"allowed_groups": ["vision", "research"], "refresh_age": 300}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("login")
    hubs = {name: HubProcess("", base / name, env=hub_env()) for name in ("oidc", "oidc-email", "google", "github")}
    clients = {name: client(hubs[name].url, f"hub-{name}") for name in hubs}
    provider = OIDCProvider(base / "provider", [clients[n] for n in ("oidc", "oidc-email", "google")], USERS)
    github = GitHubAPI(clients["github"]["client_id"], clients["github"]["client_secret"], GITHUB_USERS)
    started = []
    try:
        provider.start()
        github.start()
        creds = {n: {"client_id": c["client_id"], "client_secret": c["client_secret"],
                     "callback_url": f"{hubs[n].url}/hub/oauth_callback"} for n, c in clients.items()}
        hubs["oidc"].config_source = login_hub_source(
            base / "oidc-state", "configure_oidc", issuer=provider.issuer, admin_groups=["ml-admins"],
            **creds["oidc"], **COMMON)
        hubs["oidc-email"].config_source = login_hub_source(
            base / "oidc-email-state", "configure_oidc", issuer=provider.issuer, username_claim="email",
            **creds["oidc-email"], **COMMON)
        doc = requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=10).json()
        hubs["google"].config_source = login_hub_source(
            base / "google-state", "configure_google", hosted_domains=["example.org"], groups_claim="groups",
            endpoints=Endpoints.from_discovery(doc), scope=["openid", "email", "groups"], **creds["google"],
            **COMMON)
        hubs["github"].config_source = login_hub_source(
            base / "github-state", "configure_github", github_url=github.url, allowed_organizations=["acme"],
            group_map={"acme:vision": "vision", "acme:admins": "ml-admins"}, admin_groups=["ml-admins"],
            **creds["github"])
        for hub in hubs.values():
            started.append(hub.start())
        yield hubs, provider, clients, github
    finally:
        for hub in reversed(started):
            hub.stop()
        github.stop()
        provider.stop()


def login(hub, name, next_url=None):
    session = requests.Session()
    start = f"{hub.url}/hub/oauth_login" + (f"?next={requests.utils.quote(next_url, safe='')}" if next_url else "")
    return session, oidc_login(session, start, name, PASSWORD)


def test_groups_from_the_provider_become_projects_and_profiles(world):
    hub = world[0]["oidc"]
    session, r = login(hub, "alice")
    assert r.status_code == 200 and r.url.startswith(f"{hub.url}/hub/spawn"), (r.status_code, r.url)
    assert "Small GPU slice" in r.text and "Vision team" in r.text
    assert "Whole GPU" not in r.text and "Medium GPU slice" not in r.text
    assert hub.api("GET", "/users/alice").json()["groups"] == ["vision"]
    login(hub, "carol")
    assert hub.api("GET", "/users/carol").json()["admin"] is True
    assert hub.api("GET", "/users/alice").json()["admin"] is False


def test_a_user_in_no_allowed_group_is_refused_with_a_clear_page(world):
    hub = world[0]["oidc"]
    _, r = login(hub, "mallory")
    assert r.status_code == 403 and NOT_ALLOWED in r.text.replace("\n", " ")
    assert hub.api("GET", "/users/mallory").status_code == 404


def test_removed_from_a_group_the_profile_is_gone_at_the_next_spawn(world):
    hubs, provider = world[:2]
    hub = hubs["oidc"]
    session, r = login(hub, "erin")
    assert "Whole GPU" in r.text
    provider.set_users({**USERS, "erin": user(["vision"], preferred_username="erin")})
    try:
        # no new login: the hub refreshes erin's auth (and groups) before it spawns anything
        r = hub.api("POST", "/users/erin/server", json={"profile": "gpu"})
        assert r.status_code == 403 and "profile" in r.json()["message"], r.text
        assert hub.api("GET", "/users/erin").json()["groups"] == ["vision"]
        assert not [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline and "erin" in p.cmdline]
        _, r = login(hub, "erin")  # and the next login shows the form without it
        assert "Small GPU slice" in r.text and "Whole GPU" not in r.text
    finally:
        provider.set_users(USERS)


def projects_of(hub, name):
    """`name`'s project names from the platform API, read with a token of their own."""
    token = hub.api("POST", f"/users/{name}/tokens", json={"note": "projects"}).json()["token"]

    def projects():
        r = requests.get(f"{hub.api_url}/mlplatform/users/{name}/projects", timeout=30,
                         headers={"Authorization": f"token {token}"})
        assert r.status_code == 200, r.text
        return sorted(p["name"] for p in r.json()["projects"])
    return projects


def test_removed_from_a_group_with_a_team_project_the_project_is_gone_at_the_next_spawn(world):
    """erin leaves "vision", the group that grants the team project, and stays in "research": the
    next spawn asks the provider first and refuses the project; the platform API and the next
    login's form no longer offer it."""
    hubs, provider = world[0], world[1]
    hub = hubs["oidc"]
    _, r = login(hub, "erin")
    assert "Vision team" in r.text
    projects = projects_of(hub, "erin")
    assert projects() == ["user-erin", "vision"]
    provider.set_users({**USERS, "erin": user(["research"], preferred_username="erin")})
    try:
        r = hub.api("POST", "/users/erin/server", json={"project": "vision", "profile": "cpu"})
        assert r.status_code == 403 and "project 'vision'" in r.json()["message"], r.text
        assert hub.api("GET", "/users/erin").json()["groups"] == ["research"]
        assert projects() == ["user-erin"]
        assert not [p for p in hub.processes() if "jupyterhub.singleuser" in p.cmdline and "erin" in p.cmdline]
        _, r = login(hub, "erin")
        assert r.status_code == 200 and "Whole GPU" in r.text, (r.status_code, r.url)  # research's profiles stay
        assert "Vision team" not in r.text and 'value="vision"' not in r.text
        assert projects() == ["user-erin"]
    finally:
        provider.set_users(USERS)


def test_spawn_post_without_xsrf_or_as_no_cors_is_refused(world):
    hub = world[0]["oidc"]
    session, _ = login(hub, "alice")
    r = session.post(f"{hub.url}/hub/spawn", data={"profile": "cpu"}, allow_redirects=False, timeout=30)
    assert r.status_code == 403 and "_xsrf" in r.text
    no_cors = {"Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Site": "cross-site"}
    for url in (f"{hub.url}/hub/spawn", f"{hub.api_url}/users/alice/server"):
        r = session.post(url, data={"profile": "cpu"}, headers=no_cors, allow_redirects=False, timeout=30)
        assert r.status_code == 403, (url, r.status_code)
    assert hub.api("GET", "/users/alice").json()["servers"] == {}
    # the same session with its XSRF token is accepted (the refusals above were the check)
    r = session.post(f"{hub.api_url}/users/alice/tokens", json={"note": "xsrf control"},
                     headers={"X-XSRFToken": session.cookies.get("_xsrf", path="/hub/")}, timeout=30)
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/\\evil.example/",
                                    "https:evil.example"])
def test_next_pointing_off_site_is_not_followed(world, target):
    hub = world[0]["oidc"]

    def stays_on_the_hub(r):  # `browse` stops at (and returns) a redirect that leaves 127.0.0.1
        return not r.is_redirect and urlsplit(r.url).netloc == urlsplit(hub.url).netloc and "evil" not in r.url.split(
            "/")[2]

    session, r = login(hub, "alice", next_url=target)
    assert stays_on_the_hub(r), (r.status_code, r.url, r.headers.get("Location"))
    assert hub.api("GET", "/users/alice").status_code == 200  # the login itself went through
    # logged in already: the hub's own next= handling
    r = browse(session, "GET", f"{hub.url}/hub/login?next={requests.utils.quote(target, safe='')}")
    assert stays_on_the_hub(r), (r.status_code, r.url, r.headers.get("Location"))


def test_another_users_server_platform_api_and_job_api_are_refused(world):
    hub = world[0]["oidc"]
    alice_session, _ = login(hub, "alice")
    login(hub, "bob")
    assert hub.api("POST", "/users/bob/server", json={"profile": "cpu"}).status_code in (201, 202)
    hub.wait_for_server("bob")
    try:
        tokens = {u: hub.api("POST", f"/users/{u}/tokens", json={"note": "login test"}).json()["token"]
                  for u in ("alice", "bob")}

        def get(path, who):
            return requests.get(hub.url + path, headers={"Authorization": f"token {tokens[who]}"}, timeout=30,
                                allow_redirects=False)

        jobs = "/user/bob/ml/v1/projects/user-bob/jobs"
        assert get(jobs, "bob").status_code == 200  # the control: bob's own token works
        assert get(jobs, "alice").status_code == 403
        assert get("/user/bob/api/status", "alice").status_code == 403
        assert get("/hub/api/mlplatform/users/bob/projects", "alice").status_code in (403, 404)
        assert get("/hub/api/mlplatform/users/bob/projects", "bob").status_code == 200
        # alice's browser session: bob's server sends her through the hub's OAuth, which refuses
        r = browse(alice_session, "GET", f"{hub.url}/user/bob/lab")
        assert r.status_code == 403, (r.status_code, r.url)
        env = server_env(hub, "bob")
        client_secret = world[2]["oidc"]["client_secret"]
        assert not [k for k, v in env.items() if client_secret in v or hub.extra_env["JUPYTERHUB_CRYPT_KEY"] in v]
    finally:
        hub.api("DELETE", "/users/bob/server")


def server_env(hub, user_name):
    for p in hub.processes():
        if "jupyterhub.singleuser" in p.cmdline:
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                env = dict(e.split("=", 1) for e in f.read().decode().split("\0") if "=" in e)
            if env.get("JUPYTERHUB_USER") == user_name:
                return env
    raise AssertionError(f"no server process for {user_name}")


def test_a_megabyte_username_does_not_reach_the_log_unbounded(world):
    hub = world[0]["oidc"]
    before = len(hub.log_text())
    _, r = login(hub, "huge")  # the provider sends a 1 MB preferred_username
    assert r.status_code == 403 and "1000000 characters" in r.text
    session = requests.Session()  # and a 1 MB username posted to the login form
    page = session.get(f"{hub.url}/hub/login", timeout=30)
    xsrf = session.cookies.get("_xsrf", path="/hub/") or ""
    r = session.post(f"{hub.url}/hub/login", data={"username": HUGE, "password": "x", "_xsrf": xsrf},
                     allow_redirects=False, timeout=60)
    assert page.status_code == 200 and r.status_code in (302, 400, 403, 405), r.status_code
    grown = hub.log_text()[before:]
    assert len(grown) < 50_000 and "x" * 2000 not in grown, len(grown)


def test_secrets_stay_out_of_the_hub_log(world):
    hubs, _, clients, _ = world
    for name, hub in hubs.items():
        text = hub.log_text()
        assert clients[name]["client_secret"] not in text and hub.extra_env["JUPYTERHUB_CRYPT_KEY"] not in text


def test_google_login_checks_the_hd_claim_and_verified_email(world):
    hub = world[0]["google"]
    _, r = login(hub, "gina")
    assert r.status_code == 200 and "Small GPU slice" in r.text, (r.status_code, r.url)
    assert hub.api("GET", "/users/gina").json()["groups"] == ["vision"]  # one hosted domain: stripped
    for name in ("faker", "nohd"):  # the email's domain matches, the hd claim does not
        _, r = login(hub, name)
        assert r.status_code == 403 and "hosted domain" in r.text, (name, r.status_code)
    _, r = login(hub, "unverified")
    assert r.status_code == 403 and "not verified your email" in r.text
    for name in ("faker", "nohd", "unverified"):
        assert hub.api("GET", f"/users/{name}").status_code == 404


def test_generic_oidc_with_email_as_the_username_needs_a_verified_address(world):
    """GenericOAuthenticator does not check email_verified itself: an address the provider has not
    verified (false, or not said at all) must not become a username."""
    hub = world[0]["oidc-email"]
    _, r = login(hub, "vera")
    assert r.status_code == 200 and "Small GPU slice" in r.text, (r.status_code, r.url)
    assert hub.api("GET", "/users/vera@example.org").json()["groups"] == ["vision"]
    for name in ("ursula", "nina"):
        _, r = login(hub, name)
        assert r.status_code == 403 and "not verified your email" in r.text, (name, r.status_code)
        assert hub.api("GET", f"/users/{name}@example.org").status_code == 404
        assert hub.api("GET", f"/users/{name}").status_code == 404


def github_login(hub, name):
    session = requests.Session()
    r = browse(session, "GET", f"{hub.url}/hub/oauth_login")
    fields = {k: v[0] for k, v in parse_qs(urlsplit(r.url).query).items()}
    return session, browse(session, "POST", form_action(r, "/login/oauth/authorize"),
                           data={**fields, "login": name, "password": PASSWORD})


def test_github_login_orgs_and_teams_become_groups(world):
    hub = world[0]["github"]
    _, r = github_login(hub, "octo")
    assert r.status_code == 200 and "Small GPU slice" in r.text and "Vision team" in r.text, (r.status_code, r.url)
    assert "Whole GPU" not in r.text
    assert sorted(hub.api("GET", "/users/octo").json()["groups"]) == ["acme", "vision"]  # "acme:vision" renamed
    _, r = github_login(hub, "stranger")  # a member of an organisation anyone could name "ml-admins"
    assert r.status_code == 403
    assert hub.api("GET", "/users/stranger").status_code == 404


def test_github_team_changes_reach_the_groups_at_the_next_spawn_and_login(world):
    hub, github = world[0]["github"], world[3]
    _, r = github_login(hub, "octo")
    assert "Vision team" in r.text
    assert sorted(hub.api("GET", "/users/octo").json()["groups"]) == ["acme", "vision"]
    github.users = {**GITHUB_USERS, "octo": {**GITHUB_USERS["octo"], "teams": {}}}  # still in the organisation
    try:
        r = hub.api("POST", "/users/octo/server", json={"project": "vision", "profile": "mig-1g"})
        assert r.status_code == 403 and "project 'vision'" in r.json()["message"], r.text
        assert hub.api("GET", "/users/octo").json()["groups"] == ["acme"]
        _, r = github_login(hub, "octo")
        assert r.status_code == 200 and "Vision team" not in r.text and "Small GPU slice" not in r.text, r.status_code
        assert hub.api("GET", "/users/octo").json()["groups"] == ["acme"]
    finally:
        github.users = GITHUB_USERS


@pytest.mark.parametrize("listed", [True, False], ids=["claims-supported", "no-claims-supported"])
def test_an_unknown_groups_claim_is_reported_at_hub_start_naming_the_key(world, hub_factory, tmp_path, listed):
    """A typo in the groups claim would otherwise show only at the first login (no one gets groups,
    so no one may log in): the hub's log names the key when it starts, whether the provider's
    discovery document lists its claims (and not this one) or lists none."""
    provider = world[1]
    doc = requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=10).json()
    assert ("grups" not in doc["claims_supported"]) and "groups" in doc["claims_supported"]
    unlisted = {} if listed else {"endpoints": Endpoints.from_discovery(
        {k: v for k, v in doc.items() if k != "claims_supported"})}
    source = login_hub_source(tmp_path / "state", "configure_oidc", issuer=provider.issuer, client_id="hub-oidc",
                              client_secret="s", allowed_groups=["vision"], groups_claim="grups", **unlisted)
    hub = hub_factory(source, env=hub_env())  # it starts: a warning, not an error
    log = hub.log_text()
    key = "groups_claim (GenericOAuthenticator.auth_state_groups_key): 'grups' "
    warned = log.find(key if not listed else "groups_claim (GenericOAuthenticator.auth_state_groups_key): the "
                                             "provider's claims_supported does not list 'grups'")
    assert 0 <= warned < log.index("JupyterHub is now running"), hub.log_tail()
    if not listed:
        assert "cannot be checked at hub start" in log[warned:].splitlines()[0]


def test_misconfiguration_stops_the_hub_naming_the_keys(world, tmp_path):
    provider = world[1]
    source = login_hub_source(tmp_path / "state", "configure_oidc", issuer=provider.issuer, client_id="hub-oidc",
                              client_secret="s", allowed_groups=[], groups_claim="realm_access..roles")
    hub = HubProcess(source, tmp_path / "hub", env=hub_env(), start_timeout=30)
    with pytest.raises(RuntimeError) as e:
        hub.start()
    assert "GenericOAuthenticator.allowed_groups: no one could log in" in str(e.value)
    assert "groups_claim (GenericOAuthenticator.auth_state_groups_key): 'realm_access..roles' is not a claim " \
           "path" in str(e.value)


def test_no_one_allowed_set_after_the_helper_still_stops_the_hub(world, tmp_path):
    """The helper's own checks cannot see a trait set after it; the authenticator checks again
    when the hub starts (JupyterHub's check_allow_config), before anyone can try to log in."""
    source = login_hub_source(tmp_path / "state", "configure_oidc", issuer=world[1].issuer, client_id="hub-oidc",
                              client_secret="s", allowed_groups=["vision"])
    hub = HubProcess(source + "c.GenericOAuthenticator.allowed_groups = set()\n", tmp_path / "hub", env=hub_env(),
                     start_timeout=30)
    with pytest.raises(RuntimeError) as e:
        hub.start()
    assert "GenericOAuthenticator.allowed_groups: no one could log in" in str(e.value)
