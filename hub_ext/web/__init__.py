"""The hub's pages and platform API (tornado handlers inside JupyterHub), and the one
`PlatformService` they and the spawners reach through the tornado settings."""
