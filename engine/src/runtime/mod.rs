//! The worker runtime: fetcher, prefetch buffer, worker pool, heartbeats, completer,
//! rescuer, pruner, circuit breakers, retry policy, shutdown. (Lands with the engine issue.)
