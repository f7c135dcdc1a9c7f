pub mod admin;
pub mod batches;
pub mod bulk;
pub mod job;
pub mod jobs;
pub mod overview;
pub mod queues;
pub mod schedules;
