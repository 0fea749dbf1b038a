"""Tables for the stand-in's pure parts: selectors, quantities, patches, pruning, scheduling."""

from decimal import Decimal

import pytest

from tests.kubeapi import errors
from tests.kubeapi.patch import strategic_patch, merge_patch
from tests.kubeapi.quantity import format_quantity, parse_quantity
from tests.kubeapi.scheduler import place
from tests.kubeapi.schema import prune
from tests.kubeapi.selection import parse_field_selector, parse_label_selector

pytestmark = pytest.mark.unit


def obj(**labels):
    return {"metadata": {"name": "x", "labels": labels}, "status": {"phase": "Running"}}


@pytest.mark.parametrize("selector, labels, expected", [
    ("a=1", {"a": "1"}, True),
    ("a=1", {"a": "2"}, False),
    ("a!=1", {}, True),
    ("a in (1,2),b", {"a": "2", "b": ""}, True),
    ("a notin (1, 2)", {"a": "3"}, True),
    ("!a", {"a": "1"}, False),
    ("app.kubernetes.io/name=hub", {"app.kubernetes.io/name": "hub"}, True),
    ("a=", {"a": ""}, True),
])
def test_label_selector_table(selector, labels, expected):
    assert parse_label_selector(selector)(obj(**labels)) is expected


@pytest.mark.parametrize("bad", ["a in ()", "=x", "a b", "a in (1"])
def test_malformed_label_selectors(bad):
    with pytest.raises(errors.ApiError) as e:
        parse_label_selector(bad)
    assert e.value.code == 400


def test_field_selector_checks_supported_labels():
    pred = parse_field_selector("status.phase=Running,metadata.name!=y", ("status.phase",), "Pod")
    assert pred(obj())
    with pytest.raises(errors.ApiError):
        parse_field_selector("spec.foo=1", ("status.phase",), "Pod")


@pytest.mark.parametrize("text, value", [
    ("1", Decimal(1)), ("500m", Decimal("0.5")), ("1Gi", Decimal(2**30)), ("2k", Decimal(2000)),
    ("1.5", Decimal("1.5")), ("1e3", Decimal(1000)), (3, Decimal(3)),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["lots", "1.2.3", "", True, "5Gb"])
def test_bad_quantities(bad):
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_format_quantity():
    assert [format_quantity(Decimal(x)) for x in ("2", "0.5", "1.25")] == ["2", "500m", "1250m"]


def test_merge_patch_rfc7386_examples():
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == \
        {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_strategic_patch_merges_by_key_and_honours_directives():
    base = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}],
                     "tolerations": [{"key": "x"}]}, "metadata": {"finalizers": ["f1"]}}
    patch = {"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "a", "$patch": "delete"},
                                     {"name": "c", "image": "4"}],
                      "tolerations": [{"key": "y"}]}, "metadata": {"finalizers": ["f2"]}}
    out = strategic_patch(base, patch)
    assert out["spec"]["containers"] == [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # no merge key: replaced
    assert out["metadata"]["finalizers"] == ["f1", "f2"]
    assert base["spec"]["containers"][1]["image"] == "2"  # input untouched


def test_prune_drops_undeclared_fields_and_nulls():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "integer"}, "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
        "n": {"type": "string", "nullable": True}}}}}
    o = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "anything": 1},
         "spec": {"a": 1, "b": 2, "free": {"k": {"deep": 1}}, "m": {"one": {"v": "s", "w": "t"}}, "n": None,
                  "a2": None}, "extra": 1}
    dropped = prune(o, schema)
    assert o == {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "anything": 1},
                 "spec": {"a": 1, "free": {"k": {"deep": 1}}, "m": {"one": {"v": "s"}}, "n": None}}
    assert sorted(dropped) == ["extra", "spec.a2", "spec.b", "spec.m.one.w"]


def node(name, **alloc):
    return {"metadata": {"name": name, "labels": {}}, "spec": {}, "status": {"allocatable": alloc}}


def pod(**limits):
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": limits, "limits": limits}}]}}


def test_place_picks_a_node_with_room_and_explains_when_none_fits():
    nodes = [node("a", cpu="2"), node("b", cpu="8", **{"nvidia.com/gpu": "1"})]
    assert place(pod(**{"nvidia.com/gpu": "1"}), nodes, {}) == ("b", "")
    busy = {"b": [pod(**{"nvidia.com/gpu": "1"})]}
    chosen, why = place(pod(**{"nvidia.com/gpu": "1"}), nodes, busy)
    assert chosen is None and why == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert place(pod(cpu="4"), nodes, {}) == ("b", "")
