//! Traces that follow a job: the W3C trace context of the span that enqueued a job is
//! stored with it, and the spans of its claim, run and finish link back to it.
