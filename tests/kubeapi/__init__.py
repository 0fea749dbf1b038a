"""A Kubernetes API stand-in for tests: real HTTP on 127.0.0.1, real client libraries on the other
side. See README.md beside this file for what it does and what it does not."""

from .standin import StandIn, write_kubeconfig

__all__ = ["StandIn", "write_kubeconfig"]
