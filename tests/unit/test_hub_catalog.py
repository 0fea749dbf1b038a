"""The local runtime's catalogue and project limits from the hub's platform API answers."""

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS
from server_ext.service.hub_catalog import catalogue_of

pytestmark = pytest.mark.unit

CATALOG = {"accelerators": [{"name": "1g.5gb", "type": "mig", "display_name": "MIG 1g.5gb slice",
                             "resource": "nvidia.com/mig-1g.5gb", "mig_profile": "1g.5gb", "node_selector": {},
                             "tolerations": [], "strategy": "mixed", "product": None}]}
PROJECTS = {"projects": [{"name": "vision", "limits": {"1g.5gb": 2}}, {"name": "ops", "limits": None}]}


def test_a_projects_accelerators_and_limits():
    accelerators, limits = catalogue_of(CATALOG, PROJECTS, "vision")
    assert list(accelerators) == ["1g.5gb"] and accelerators["1g.5gb"].mig_profile == "1g.5gb"
    assert limits == {"1g.5gb": 2}
    assert catalogue_of(CATALOG, PROJECTS, "ops")[1] is None  # an admin's: no limit


def test_a_hub_that_refuses_gives_the_built_in_catalogue_without_limits():
    assert catalogue_of(None, PROJECTS, "vision") == (dict(DEFAULT_ACCELERATORS), None)


def test_malformed_answers_and_unknown_projects_are_errors_not_a_wrong_catalogue():
    with pytest.raises(UpstreamError):
        catalogue_of({"accelerators": [{"name": "x"}]}, PROJECTS, "vision")
    with pytest.raises(UpstreamError):
        catalogue_of(CATALOG, {"projects": [{"name": "vision", "limits": {"1g.5gb": "two"}}]}, "vision")
    with pytest.raises(UserInputError) as e:
        catalogue_of(CATALOG, PROJECTS, "nope")
    assert e.value.status == 403 and e.value.field == "project"
