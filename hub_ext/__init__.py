"""jupyterhub-mlplatform, hub side: what runs inside the JupyterHub process."""

__version__ = "0.1.0"
