"""The platform's spawners: `PlatformSpawner` (a KubeSpawner) and `LocalPlatformSpawner` (a
local-process spawner), each applying the plan the shared configuration (`platform`) decides, with
their parts (hub token Secret, writable dataset copies, spawn experience) named here."""
