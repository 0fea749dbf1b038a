"""jupyterhub-mlplatform, notebook side: what runs in every single-user server and in the kubectl plugin."""

__version__ = "0.1.0"


def _jupyter_server_extension_points():
    from server_ext.app import MLPlatformApp

    return [{"module": "server_ext.app", "app": MLPlatformApp}]
