//! Awaiting job results: same-process push, cross-process polling. (Lands with the engine issue.)
