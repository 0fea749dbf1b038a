"""An example training package for jupyterhub-mlplatform: run it as ``python -m trainer.task``."""

__version__ = "0.1.0"
