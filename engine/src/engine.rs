//! The engine facade: build, start, enqueue, await, control, shut down. (Lands with the engine issue.)
