"""``python -m hub_ext.cli``: the same as the ``mlplatform`` command."""

from hub_ext.cli.main import main

raise SystemExit(main())
