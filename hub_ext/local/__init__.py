"""The local runtime's I/O: projects as directories, the accelerator device inventory, and
the ``make demo`` launcher."""
