"""The platform's spawners: `PlatformSpawner` (`kube`, a KubeSpawner) and `LocalPlatformSpawner`
(`local`, a local-process spawner), each applying the `Plan` (`runtime`) that the shared
configuration (`platform`, with the trait groups `mount_config`, `dataset_config`, `tenancy_config`)
decides, and calling the parts it holds: `configured` and `experience` (both spawners); `admission`,
`hub_token`, `server_copies`, `kube_progress` and the hub's `kube_shared` (Kubernetes);
`local_devices` (one machine). `service` is the hub's one `PlatformService`; `form` the spawn form."""
