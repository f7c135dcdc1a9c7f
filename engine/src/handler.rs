//! Handler trait, registry by type key, middleware. (Lands with the engine issue.)
