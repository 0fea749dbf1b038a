"""Chromium through a real OpenID Connect provider (npm oidc-provider) into the hub: a user signs in
on the provider's own page, consents, comes back and sees exactly the projects and profiles their
groups grant; a user in no allowed group gets a clear refusal; logout ends the hub session; a
user removed from a group at the provider has lost its profile at their next login."""

from __future__ import annotations

import re

import pytest

from hub_ext.login.rules.settings import NOT_ALLOWED
from tests.harness.browser import screenshot
from tests.harness.hub import HubProcess
from tests.harness.oidc import OIDCProvider, client
from tests.harness.oidc_hubs import PASSWORD, hub_env, login_hub_source, user

pytestmark = pytest.mark.browser

USERS = {
    "alice": user(["vision"], preferred_username="alice", email="alice@example.org", email_verified=True),
    "erin": user(["vision", "research"], preferred_username="erin", email="erin@example.org", email_verified=True),
    "mallory": user(["contractors"], preferred_username="mallory", email="mallory@example.org",
                    email_verified=True),
}


@pytest.fixture(scope="module")
def oidc(tmp_path_factory):
    base = tmp_path_factory.mktemp("oidc-browser")
    hub = HubProcess("", base / "hub", env=hub_env())
    hub_client = client(hub.url, "jupyterhub")
    provider = OIDCProvider(base / "provider", [hub_client], USERS).start()
    try:
        hub.config_source = login_hub_source(
            base / "state", "configure_oidc", issuer=provider.issuer, client_id=hub_client["client_id"],
            client_secret=hub_client["client_secret"], allowed_groups=["vision", "research"],
            callback_url=f"{hub.url}/hub/oauth_callback", login_service="Example SSO")
        hub.start()
        yield hub, provider
    finally:
        hub.stop()
        provider.stop()


def choices(page) -> dict[str, list[str]]:
    """The projects and profiles the spawn form offers (its radio buttons' values)."""
    return {name: page.eval_on_selector_all(f"input[name={name}]", "els => els.map(e => e.value)")
            for name in ("project", "profile")}


def sign_in(page, hub, login, password=PASSWORD, shots=None):
    """From the hub's login page through the provider's sign-in and consent pages: every call is the
    user's first login, so the provider must ask them to consent to the scopes the hub wants."""
    page.goto(f"{hub.url}/hub/login")
    page.get_by_text("Sign in with Example SSO").click()
    page.wait_for_selector("#login")
    if shots:
        screenshot(page, f"{shots}-provider-login")
    page.fill("#login", login)
    page.fill("#password", password)
    page.click("#sign-in")
    page.wait_for_selector("#allow")  # fails (times out) if the provider skipped consent
    assert re.search(r"/interaction/[\w-]+$", page.url) and not page.url.startswith(hub.url), page.url
    assert {"openid", "profile", "email", "groups"} <= set(page.locator("li").all_inner_texts())
    if shots:
        screenshot(page, f"{shots}-provider-consent")
    page.click("#allow")
    page.wait_for_load_state()


def test_sign_in_consent_see_your_profiles_and_log_out(oidc, browser_page):
    hub, _ = oidc
    page = browser_page
    page.goto(f"{hub.url}/hub/login")
    page.get_by_text("Sign in with Example SSO").click()
    page.fill("#login", "alice")
    page.fill("#password", "not-the-password")
    page.click("#sign-in")
    page.wait_for_selector("text=Invalid login or password")

    sign_in(page, hub, "alice", shots="oidc-alice")
    page.wait_for_url(re.compile(r"/hub/spawn"))
    page.wait_for_selector("text=Small GPU slice")
    assert choices(page) == {"project": ["user-alice", "vision"], "profile": ["cpu", "mig-1g"]}
    assert page.get_by_text("Whole GPU").count() == 0 and page.get_by_text("Medium GPU slice").count() == 0
    screenshot(page, "oidc-alice-spawn-form")

    page.goto(f"{hub.url}/hub/logout")
    page.goto(f"{hub.url}/hub/spawn")
    page.wait_for_url(re.compile(r"/hub/login"))
    assert page.get_by_text("Sign in with Example SSO").count() == 1
    screenshot(page, "oidc-alice-logged-out")


def test_a_user_in_no_allowed_group_is_refused(oidc, browser_page):
    hub, _ = oidc
    sign_in(browser_page, hub, "mallory")
    browser_page.wait_for_selector("text=none of the groups allowed")
    assert NOT_ALLOWED in " ".join(browser_page.inner_text("body").split())
    screenshot(browser_page, "oidc-mallory-refused")


def test_removed_from_a_group_the_profile_is_gone_at_the_next_login(oidc, browser_page):
    hub, provider = oidc
    page = browser_page
    sign_in(page, hub, "erin")
    page.wait_for_selector("text=Whole GPU")
    assert choices(page) == {"project": ["user-erin", "vision"], "profile": ["cpu", "mig-1g", "mig-3g", "gpu"]}
    screenshot(page, "oidc-erin-before")
    provider.set_users({**USERS, "erin": user(["vision"], preferred_username="erin")})
    try:
        page.goto(f"{hub.url}/hub/logout")
        page.goto(f"{hub.url}/hub/login")
        page.get_by_text("Sign in with Example SSO").click()  # the provider remembers erin: no password asked
        page.wait_for_url(re.compile(r"/hub/spawn"))
        page.wait_for_selector("text=Small GPU slice")
        assert choices(page) == {"project": ["user-erin", "vision"], "profile": ["cpu", "mig-1g"]}
        assert page.get_by_text("Whole GPU").count() == 0
        screenshot(page, "oidc-erin-after-group-removed")
    finally:
        provider.set_users(USERS)
