"""What the operator decides: admission answers, dataset loads, held pods, volumes. Pure: no
I/O, no kopf (import-linter contract ``pure``); the modules one level up do the I/O."""
