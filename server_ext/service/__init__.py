"""The jobs service every face calls (`jobs`), where it is built (`wiring`), and what it asks
the hub and the cluster about the user (projects, catalogue, files). Imports no face."""
