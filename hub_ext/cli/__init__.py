"""`mlplatform`, the platform team's command line (check-config, render-project, operator, demo)."""
