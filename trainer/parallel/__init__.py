"""Past one device: where the model lives (the placement interface), data-parallel replication under torchrun and FSDP2 sharding."""
