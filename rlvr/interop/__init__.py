"""rlvr and the other environment standards.

- `rlvr.interop.serve`: any registered rlvr environment as an OpenEnv server (`rlvr serve ENV`),
  its verdicts (status, reason, components) in every finished step's metadata.
- `rlvr.interop.trl`: TRL's `GRPOTrainer(environment_factory=...)` pointed at such a server
  (over the network, episodes included; `rlvr.integrations.trl` is the in-process route: rlvr
  rewards as TRL reward functions).

The other direction (OpenEnv and `verifiers` environments loaded as rlvr environments by the
names `openenv:<name>` and `verifiers:<name>`) lives with the environments: `rlvr.envs.from_openenv`,
`rlvr.envs.from_verifiers`.
"""
