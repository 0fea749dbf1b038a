"""jupyterhub-mlplatform, notebook side: what runs in every single-user server and in the kubectl plugin."""

__version__ = "0.1.0"
