//! Cluster mirroring (KIP-1279): mirror metadata manager, partition state machine, fetcher.
