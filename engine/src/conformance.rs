//! The store conformance suite: one set of behaviours, written once against `trait Store`,
//! that every backend must pass (River's driver tests, sqlx's shared suite).
//!
//! A backend's test file provides an async factory returning `Option<StoreFactory>` — `None`
//! when the backend is unavailable (SQL Server without `DECK_TEST_MSSQL`) — and expands the
//! whole suite with one macro, one `#[tokio::test]` per case so failures are named:
//!
//! ```ignore
//! async fn sqlite_factory() -> Option<StoreFactory> { ... }
//! deck_engine::store_conformance_tests!(sqlite_factory);
//! ```
//!
//! Each case gets a fresh, empty database. Cases that need several connections (claimers
//! racing each other, a worker and an operator in different processes) open more handles to
//! the same database with [`StoreFactory::connect`]. Cases that prove a failing transition
//! rolls back need a way to make a real insert fail inside the backend; a backend offers it
//! through [`FaultInjector`] (SQLite and SQL Server do it with a trigger), and without one
//! those cases print a notice and pass vacuously.

pub mod admin;
pub mod batches;
pub mod concurrency;
pub mod enqueue;
pub mod incident;
pub mod maintenance;
pub mod ownership;
pub mod queues;
pub mod reads;
pub mod recurring;
pub mod rollback;
pub mod scheduling;
pub mod support;
pub mod telemetry;
pub mod transitions;
pub mod uniqueness;

pub use support::{Connector, FaultInjector, FaultTable, StoreFactory};

/// Expand the whole conformance suite into the calling test file, one `#[tokio::test]` per
/// case. The argument is the path of an async fn returning `Option<StoreFactory>`.
#[macro_export]
macro_rules! store_conformance_tests {
    ($factory:path) => {
        $crate::__store_conformance_cases!($factory;
            enqueue::enqueue_round_trips_every_field,
            enqueue::empty_payload_is_stored_as_null,
            enqueue::invalid_requests_write_nothing,
            enqueue::envelope_limits_are_inclusive,
            enqueue::enqueue_batch_keeps_request_order,
            enqueue::enqueue_batch_is_all_or_nothing_on_a_bad_item,
            enqueue::the_largest_batch_goes_through_every_path,
            enqueue::duplicate_idempotency_key_returns_the_active_job,
            enqueue::duplicate_idempotency_key_inside_one_batch,
            enqueue::idempotency_key_is_free_again_once_the_job_finished,
            enqueue::enqueue_creates_the_queue_settings_row,
            uniqueness::a_window_counting_successes_returns_the_archived_job,
            uniqueness::a_window_counting_deaths_returns_the_dead_job,
            uniqueness::a_window_without_states_counts_active_jobs_only,
            uniqueness::a_lapsed_window_frees_the_key_for_a_new_window,
            uniqueness::a_key_outlives_retention_and_purge_inside_its_window,
            uniqueness::a_resurrected_job_holds_its_key_again_as_an_active_job,
            uniqueness::racing_enqueues_of_one_unique_key_create_one_job,
            recurring::schedules_round_trip_and_keep_their_state_through_edits,
            recurring::an_occurrence_enqueues_one_job_and_its_key_refuses_a_second,
            recurring::overlap_skips_an_occurrence_while_the_last_job_is_active,
            recurring::a_paused_schedule_fires_nothing_but_a_manual_run,
            recurring::racing_instances_enqueue_each_occurrence_once,
            recurring::schedule_history_is_pruned_and_the_last_run_stays,
            recurring::after_an_outage_run_once_runs_the_latest_misfire_and_the_ticks,
            recurring::after_an_outage_run_all_runs_the_latest_cap_misfires_and_the_ticks,
            recurring::after_an_outage_skip_runs_only_the_ticks,
            recurring::an_edit_starts_from_now_without_backfill,
            batches::a_batch_is_written_whole_with_its_members,
            batches::the_last_success_fires_on_success_and_on_complete_once,
            batches::a_death_fires_on_death_once_and_completes_the_batch,
            batches::a_long_callback_payload_rides_along_whole,
            batches::resurrecting_a_dead_member_reopens_the_batch,
            batches::purging_a_pending_member_takes_it_out_of_the_batch,
            batches::members_finishing_together_on_two_handles_fire_each_callback_once,
            batches::trace_context_travels_with_the_job_through_every_pillar,
            batches::retention_deletes_finished_batches_and_keeps_open_ones,
            scheduling::future_jobs_are_not_claimable_until_due,
            scheduling::claim_order_is_priority_then_due_time_then_id,
            scheduling::expired_jobs_are_not_claimed_and_rescue_dead_letters_them,
            scheduling::claim_honours_the_type_filter,
            scheduling::claim_honours_the_queue_filter,
            queues::paused_queue_is_not_claimed_until_resumed,
            queues::queue_settings_round_trip,
            queues::invalid_queue_patch_changes_nothing,
            queues::bulkhead_holds_inside_one_batch,
            queues::bulkhead_holds_when_the_claim_starts_jobs,
            queues::bulkhead_counts_processing_jobs_and_frees_on_finish,
            queues::bulkhead_holds_across_handles,
            queues::rate_limit_caps_starts_per_period_and_says_until_when,
            queues::rate_limit_counts_from_zero_in_the_next_period,
            transitions::success_moves_the_job_to_the_archive,
            transitions::long_results_and_errors_are_kept_whole,
            transitions::claim_can_start_the_best_jobs_at_once,
            transitions::a_large_claim_returns_every_job_once_in_claim_order,
            transitions::retry_puts_the_job_back_with_its_error,
            transitions::dead_letter_moves_the_job_to_the_dlq,
            transitions::release_returns_fetched_jobs_without_spending_an_attempt,
            transitions::release_with_run_at_defers_the_job,
            transitions::released_completion_gives_a_started_job_back_unrun,
            transitions::cancel_of_pending_or_fetched_dead_letters_at_once,
            transitions::cancel_of_processing_is_requested_through_the_heartbeat,
            transitions::cancel_of_finished_or_unknown_is_not_found,
            transitions::resurrect_brings_a_dead_job_back_with_edits,
            transitions::resurrect_of_a_job_not_in_the_dlq_is_not_found,
            transitions::resurrect_drops_a_key_an_active_job_now_holds,
            transitions::bulk_resurrect_of_jobs_sharing_a_key_keeps_one_key,
            transitions::edit_job_changes_pending_and_dead_jobs,
            transitions::edit_job_refuses_fetched_processing_and_archived,
            transitions::purge_deletes_from_each_pillar,
            transitions::bulk_by_ids_applies_each_action,
            transitions::bulk_preview_counts_and_samples,
            transitions::bulk_by_filter_respects_filter_and_cap,
            transitions::continuations_follow_their_trigger,
            incident::timing_filters_list_exactly_what_the_tiles_count,
            incident::run_now_makes_a_waiting_job_due_without_spending_an_attempt,
            incident::bulk_run_now_and_priority_change_only_pending_jobs,
            incident::bulk_cancel_by_filter_racing_workers_loses_no_job,
            transitions::finished_jobs_returns_only_finished_ones,
            ownership::wrong_worker_changes_nothing,
            ownership::completion_requires_processing,
            ownership::one_batch_finishing_a_job_twice_applies_the_first,
            reads::list_jobs_filters_each_pillar,
            reads::list_jobs_pages_every_sort_both_ways,
            reads::list_jobs_pages_archive_and_dlq_by_finish_time,
            reads::list_jobs_ties_keep_one_order_both_ways,
            reads::list_jobs_pages_jobs_finished_together,
            reads::a_page_after_a_vanished_row_skips_nothing,
            reads::cursors_round_trip_through_text,
            reads::text_search_windows_payloads_and_counts,
            reads::an_id_pasted_anywhere_finds_its_job,
            telemetry::summary_counts_each_state,
            telemetry::queue_stats_counts_and_lag,
            telemetry::throughput_buckets_fill_missing_minutes,
            telemetry::top_errors_group_by_fingerprint,
            telemetry::ninety_mailbox_failures_are_one_group_until_they_leave,
            telemetry::run_times_count_finished_runs_per_job_type,
            telemetry::pending_groups_count_pending_jobs_per_queue_and_type,
            maintenance::rescue_with_default_policy_leaves_fresh_work_alone,
            maintenance::rescue_releases_stale_fetched_jobs,
            maintenance::rescue_steps_move_at_most_their_limit,
            maintenance::rescue_dead_letters_zombies,
            maintenance::rescue_honours_the_queue_zombie_timeout,
            maintenance::rescue_handles_dead_and_deregistered_instances,
            maintenance::instances_are_listed_while_they_hold_jobs,
            maintenance::prune_removes_old_finished_rows,
            maintenance::prune_steps_delete_at_most_their_limit,
            rollback::failed_archive_insert_rolls_back_the_whole_completion_batch,
            rollback::failed_dlq_insert_rolls_back_dead_letter_and_cancel,
            rollback::failed_continuation_insert_rolls_back_the_parent,
            rollback::failed_insert_rolls_back_enqueue_batch,
            rollback::failed_insert_rolls_back_resurrect_and_rescue,
            admin::instances_heartbeat_list_and_deregister,
            admin::instance_quiet_is_stored_and_read_back_by_list_and_heartbeat,
            admin::settings_default_then_round_trip,
            admin::audit_appends_and_pages_newest_first,
            admin::audit_lists_by_actor_action_and_time,
            admin::refused_actions_are_audited_with_count_zero,
            concurrency::many_claimers_never_share_a_job,
            concurrency::racing_completions_apply_once,
            concurrency::racing_enqueues_of_one_key_create_one_job,
            concurrency::stale_buffered_job_never_runs,
            concurrency::zombie_then_late_success_is_rejected,
            concurrency::bulkhead_holds_under_concurrent_claimers,
            concurrency::rate_limit_holds_under_concurrent_claimers,
            concurrency::operator_sweeper_and_worker_races_have_one_outcome,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_cases {
    ($factory:path; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                match $factory().await {
                    Some(factory) => {
                        $crate::conformance::$module::$case(factory).await
                    }
                    None => println!("skipped: DECK_TEST_MSSQL not set"),
                }
            }
        )*
    };
}
