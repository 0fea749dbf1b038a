"""The operator's ``member-accounts`` webhook (mutating; batch Jobs, PyTorchJobs, TFJobs, Trainer v2
TrainJobs and Katib Experiments, CREATE and UPDATE, in project namespaces): in a team project the pods of what a member
makes run as that member's own ServiceAccount (what is decided: `rules.member_accounts`, pure).

Per review it reads whether the namespace is a team's (`OperatorContext.projects`) and lists the
namespace's member ServiceAccounts (their annotations only matter), each read once, no retries,
within `READ_TIMEOUT_S`. An UPDATE that leaves every pod template as it was (a teammate cancelling a
sweep, a Job suspended) is not judged again. A refusal names the field (403); a read that fails
refuses with the reason (503); anything unexpected is logged here and refused with a short message
(500), never a stack trace. Every decision is logged with the object and the user and counted on
``/metrics`` (``mlplatform_operator_webhook_reviews_total{webhook="member-accounts"}``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

import jsonpatch
import kopf

from hub_ext.core.errors import UserInputError
from hub_ext.kube.client import Kube, KubeError, path_of
from hub_ext.manifests.tenancy import MEMBER_LABEL
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.rules import member_accounts as rules

log = logging.getLogger("mlplatform.operator.members")
READ_TIMEOUT_S = 1.5
KINDS = (("batch", "v1", "jobs"), ("kubeflow.org", "v1", "pytorchjobs"), ("kubeflow.org", "v1", "tfjobs"),
         ("kubeflow.org", "v1beta1", "experiments"), ("trainer.kubeflow.org", "v1alpha1", "trainjobs"))
WEBHOOK = "member-accounts"


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    """One handler per kind; its id (the URL path the webhook configuration calls) is
    ``member-accounts-<plural>``."""
    for group, version, plural in KINDS:
        kopf.on.mutate(group, version, plural, id=f"{WEBHOOK}-{plural}", operations=["CREATE", "UPDATE"],
                       registry=registry)(_handler(ctx))


def _handler(ctx: OperatorContext):
    async def member_accounts(body, old, patch, operation, userinfo, **_: Any) -> None:
        if operation not in ("CREATE", "UPDATE"):  # kopf does not filter served reviews by operation
            return
        obj, meta = dict(body), body.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        where = f"{obj.get('kind')} {namespace}/{meta.get('name') or meta.get('generateName', '') + '*'}"
        user, groups = (userinfo or {}).get("username") or "", list((userinfo or {}).get("groups") or [])
        if operation == "UPDATE" and old is not None and _templates(obj) == _templates(dict(old)):
            return
        try:
            ops = await asyncio.wait_for(_ops(ctx, obj, namespace, user, groups), 2 * READ_TIMEOUT_S + 0.5)
        except UserInputError as e:
            log.info("refused the %s by %s: %s", where, user, e)
            _count(ctx, "refused")
            raise kopf.AdmissionError(str(e), code=e.status) from None
        except (KubeError, asyncio.TimeoutError) as e:
            why = e.reason if isinstance(e, KubeError) else "Kubernetes did not answer in time"
            log.warning("refused the %s by %s: could not read the project's member accounts: %s", where, user, why)
            raise kopf.AdmissionError(f"the platform could not look up your ServiceAccount: {why}", code=503) from None
        except Exception:
            log.exception("the member account check of the %s by %s failed", where, user)
            raise kopf.AdmissionError("the platform's member account check failed; try again or tell the "
                                      "platform's administrators", code=500) from None
        if ops:
            patch.fns.append(lambda raw: jsonpatch.apply_patch(raw, ops, in_place=True))
            log.info("the %s by %s runs its pods as %s (%d pod templates)", where, user,
                     ops[0]["value"], len(ops))
            _count(ctx, "assigned")

    return member_accounts


async def _ops(ctx: OperatorContext, obj: dict, namespace: str, user: str, groups: list[str]) -> list[dict]:
    if not namespace or not await ctx.projects.is_team(namespace):
        return []
    kube = Kube(ctx.kube.api_client, timeout=READ_TIMEOUT_S, retries=0)
    listing = await kube.list(path_of("ServiceAccount", namespace), labelSelector=MEMBER_LABEL)
    own = rules.account_of(user, groups, namespace, rules.member_accounts(listing.get("items") or []))
    return [] if own is None else rules.decide(obj, own, namespace)


def _templates(obj: Mapping[str, Any]) -> list:
    return [spec for _, spec in rules.held_specs(obj)] + \
        [((obj.get("spec") or {}).get("trialTemplate") or {}).get("configMap")]


def _count(ctx: OperatorContext, result: str) -> None:
    ctx.metrics.inc("mlplatform_operator_webhook_reviews_total", webhook=WEBHOOK, result=result)
