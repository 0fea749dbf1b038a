"""Entry point of the `kubectl-ai_platform` console script (work in progress)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("kubectl ai-platform: not yet implemented", file=sys.stderr)
    return 2
