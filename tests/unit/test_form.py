"""The spawn form: rendered HTML is well-formed, every input is labelled and appears once, capacity
and markers are shown; the POST is read back into the flat user_options."""

import html
from html.parser import HTMLParser

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import parse_entitlements, projects_for
from hub_ext.core.mounts import Available, Credential, Dataset
from hub_ext.core.profiles import parse_profiles
from hub_ext.spawners.form import QueueView, capacity_text, options_from_form, render_form

pytestmark = pytest.mark.unit

ACC = parse_accelerators({"1g.5gb": {"type": "mig", "profile": "1g.5gb"}})
PROFILES = parse_profiles({
    "cpu": {"display_name": "CPU only"},
    "mig": {"display_name": "Small slice", "accelerator": "1g.5gb",
            "images": {"torch": {"image": "torch:2", "default": True}, "tf": {"image": "tf:2"}}},
}, ACC)
ENT = parse_entitlements({"profiles": ["cpu"]}, {"vision": {"project": "vision", "profiles": ["cpu", "mig"],
                                                            "limits": {"1g.5gb": 1}}}, PROFILES, ACC)
FILES = {"vision": Available((Credential("sa", "gcp-credential", "/p/sa.json"),), (Dataset("coco", "/p/coco"),))}


class Inputs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inputs, self.labels, self.stack = [], set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("input", "select"):
            self.inputs.append(a)
        if tag == "label":
            self.labels.add(a.get("for"))
        if tag not in ("input", "br", "meta", "img"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, f"unbalanced </{tag}>"


def parse(html):
    p = Inputs()
    p.feed(html)
    assert p.stack == [], f"unclosed: {p.stack}"
    return p


def test_form_is_well_formed_labelled_and_each_input_once():
    page = render_form(projects_for(ENT, "alice", ["vision"]), PROFILES, {"1g.5gb": (0, 2)}, FILES)
    p = parse(page)
    ids = [i["id"] for i in p.inputs]
    assert len(ids) == len(set(ids)) and set(ids) <= p.labels
    assert ids == ["project-user-alice", "project-vision", "profile-cpu", "profile-mig",
                   "profile-option-mig--image", "credential--vision--sa", "dataset--vision--coco"]
    assert "0 of 2 free — none available now" in page and "mlplatform-full" in page
    # where Kueue holds the accelerators, a full profile is still offered: the server would wait in the queue
    queued = render_form(projects_for(ENT, "alice", ["vision"]), PROFILES, {"1g.5gb": (0, 2)}, FILES,
                         QueueView(3600, {("vision", "1g.5gb"): 2}))
    assert ("0 of 2 free — queue: 2 ahead — your server would wait in the project's queue (up to 60 min) and start "
            "when its turn comes") in html.unescape(queued)
    assert "mlplatform-full" not in queued


def test_where_kueue_holds_the_slices_the_form_says_free_now_or_how_many_wait():
    (mig,) = [p for p in PROFILES if p.slug == "mig"]
    projects = {p.name: p for p in projects_for(ENT, "alice", ["vision"])}
    vision, alice = projects["vision"], projects["user-alice"]
    assert capacity_text(mig, {"1g.5gb": (1, 2)}, QueueView(3600, {("vision", "1g.5gb"): 0}), [vision]) == (
        "1 of 2 free now", False)
    assert capacity_text(mig, {"1g.5gb": (1, 2)}, QueueView(3600, {("vision", "1g.5gb"): 3}), [vision]) == (
        "1 of 2 free — queue: 3 ahead", False)  # others wait, e.g. for more than is free
    assert capacity_text(mig, {"1g.5gb": (0, 2)}, QueueView(1800), [vision]) == (
        "0 of 2 free — your server would wait in the project's queue (up to 30 min) and start when its turn "
        "comes", False)  # the Workloads could not be read: no count, still queued
    both = QueueView(3600, {("vision", "1g.5gb"): 2, (alice.name, "1g.5gb"): 0})
    assert capacity_text(mig, {"1g.5gb": (1, 2)}, both, [vision, alice]) == (
        "1 of 2 free — queue: 2 ahead in vision, 0 in Personal", False)
    # more than the cluster has: full without a queue to wait in
    assert capacity_text(mig, {"1g.5gb": (0, 0)}, both, [vision]) == ("0 of 0 free — none available now", True)


def test_user_without_the_group_sees_only_what_is_granted():
    html = render_form(projects_for(ENT, "carol", []), PROFILES, {"1g.5gb": (2, 2)}, {})
    assert "Small slice" not in html and "CPU only" in html


def test_options_from_form_keeps_only_the_chosen_profile_and_project():
    form = {"project": ["vision"], "profile": ["mig"], "profile-option-mig--image": ["tf"],
            "profile-option-cpu--image": ["ignored"], "credential--vision": ["sa"], "dataset--vision": ["coco"],
            "credential--user-alice": ["other"], "_xsrf": ["x"]}
    assert options_from_form(form) == {"project": "vision", "profile": "mig", "image": "tf",
                                       "credentials": ["sa"], "datasets": ["coco"]}


def test_choice_descriptions_are_shown_and_tied_to_their_select():
    """Production lists (jupyterhub-fancy-profiles) describe each choice: the form shows them,
    escaped, next to the option, and the free-form entry's description too."""
    from hub_ext.core.profiles import parse_profile_list

    profiles = parse_profile_list([{"display_name": "Lab", "slug": "lab", "profile_options": {"image": {
        "display_name": "Image", "choices": {
            "scipy": {"display_name": "SciPy", "description": "NumPy, SciPy & <pandas>", "slug": "scipy"},
            "r": {"display_name": "R"}},
        "unlisted_choice": {"enabled": True, "display_name": "Custom image",
                            "description_in_choices": "Any public image"}}}}], ACC)
    ent = parse_entitlements(None, {}, profiles, ACC)
    html = render_form(projects_for(ent, "carol", []), profiles, {}, {})
    p = parse(html)
    select = next(i for i in p.inputs if i.get("id") == "profile-option-lab--image")
    assert select["aria-describedby"] == "profile-option-lab--image-choices"
    assert 'id="profile-option-lab--image-choices"' in html
    assert "<li><strong>SciPy</strong>: NumPy, SciPy &amp; &lt;pandas&gt;</li>" in html
    assert 'title="NumPy, SciPy &amp; &lt;pandas&gt;"' in html and "Any public image" in html
    assert "<li><strong>R</strong>" not in html  # no description, no line
