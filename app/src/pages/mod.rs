pub mod admin;
pub mod bulk;
pub mod job;
pub mod jobs;
pub mod overview;
pub mod queues;
pub mod schedules;
