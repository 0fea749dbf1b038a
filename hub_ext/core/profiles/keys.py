"""Which keys a profile list may carry, what each means, and how an unknown one is reported.

KubeSpawner's ``profile_list`` (kubespawner 7: `_get_initialized_profile_list`, `_load_profile`,
``templates/form.html``) reads these keys; jupyterhub-fancy-profiles, the form many production hubs
use, reads a few more (descriptions on choices and on the free-form entry, dynamic image
building). Every key either reader accepts is accepted here, with the meaning it has there.
A key neither reads is *ignored* by KubeSpawner, so it is not refused: `unknown` words a warning
that names it and, where one is close, the key that was probably meant (difflib).

The platform's own spelling (``c.PlatformConfig.profiles``) is strict: an unknown key there is a
problem, with the same did-you-mean.
"""

from __future__ import annotations

import difflib
from typing import Iterable

#: profile_list[i] → meaning
PROFILE = {
    "display_name": "the name on the form (required: KubeSpawner makes the slug from it)",
    "slug": "the profile's name in user_options ('profile'); made from display_name when absent",
    "description": "a sentence under the name on the form",
    "default": "picked when the user picks nothing (the first profile when none is marked)",
    "kubespawner_override": "KubeSpawner settings this profile sets",
    "profile_options": "options the user picks within the profile (each with choices)",
}
#: profile_options[name] → meaning
OPTION = {
    "display_name": "the option's label on the form",
    "choices": "the choices offered, by key (the key is the value in user_options)",
    "unlisted_choice": "a free-form value the user may type instead of a choice",
    "dynamic_image_building": "jupyterhub-fancy-profiles: build an image with BinderHub (not offered by this "
                              "form; the option's choices and free-form value still are)",
}
#: profile_options[name].choices[key] → meaning
CHOICE = {
    "display_name": "the choice's name in the list",
    "description": "a sentence describing the choice (jupyterhub-fancy-profiles; shown on the form)",
    "default": "picked when the user picks nothing (the first choice when none is marked)",
    "slug": "the choice's name as production lists often repeat it (the key is what user_options use)",
    "kubespawner_override": "KubeSpawner settings this choice sets, over the profile's",
}
#: profile_options[name].unlisted_choice → meaning
UNLISTED = {
    "enabled": "whether the free-form value is offered",
    "display_name": "the label of the text field",
    "display_name_in_choices": "the entry in the list that stands for the free-form value",
    "description_in_choices": "a sentence describing that entry (jupyterhub-fancy-profiles)",
    "validation_regex": "a pattern the whole value must match",
    "validation_message": "what to tell the user when it does not",
    "kubespawner_override": "KubeSpawner settings, '{value}' replaced by what the user typed",
}
#: the platform's own spelling: profiles[name] → meaning
NATIVE = {
    "display_name": PROFILE["display_name"], "description": PROFILE["description"], "default": PROFILE["default"],
    "accelerator": "a catalogue accelerator name", "accelerator_count": "how many of it (default 1)",
    "cpu": "{'guarantee': n, 'limit': n} in CPUs", "memory": "{'guarantee': size, 'limit': size}",
    "images": "images to choose from, by name: {'image': ..., 'display_name': ..., 'default': ...}",
    "kubespawner_override": PROFILE["kubespawner_override"], "profile_options": PROFILE["profile_options"],
}
IMAGE = {"image", "display_name", "default"}


def did_you_mean(key: object, known: Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest known name, or ''."""
    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown(key: object, known: Iterable[str], who: str = "KubeSpawner") -> str:
    """The message for a key `who` does not read."""
    return f"unknown key, ignored by {who}{did_you_mean(key, known)}"
