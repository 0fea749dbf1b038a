"""KubeSpawner's `safe_slug` (valid Kubernetes names, never colliding), imported on first use:
importing `kubespawner.slugs` loads all of KubeSpawner and kubernetes_asyncio (seconds), which
`kubectl ai-platform` and the local runtime should not pay for at start-up."""

from __future__ import annotations


def safe_slug(name: str, **kwargs) -> str:
    from kubespawner.slugs import safe_slug as slug

    return slug(name, **kwargs)
