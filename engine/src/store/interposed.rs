//! A `Store` that hands every call to another store, with test hooks before and after:
//! the one place tests count, hold back or refuse store calls (`testing` feature).

use std::sync::Arc;

use crate::store::contract::*;

/// Which store method a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreCall {
    Ping,
    Enqueue,
    EnqueueBatch,
    ClaimBatch,
    MarkProcessing,
    Heartbeat,
    Release,
    Complete,
    Cancel,
    Resurrect,
    EditJob,
    Purge,
    BulkByIds,
    BulkPreview,
    BulkFilterStep,
    ListSchedules,
    CreateSchedule,
    ReplaceSchedule,
    SetScheduleEnabled,
    DeleteSchedule,
    FireSchedule,
    ScheduleRuns,
    CreateBatch,
    GetBatch,
    ListBatches,
    BatchMembers,
    ListQueues,
    UpdateQueue,
    LoadSettings,
    SaveSettings,
    Rescue,
    PruneStep,
    HeartbeatInstance,
    SetInstanceQuiet,
    DeregisterInstance,
    ListInstances,
    AppendAudit,
    ListAudit,
    GetJob,
    FinishedJobs,
    ListJobs,
    CountJobs,
    SearchWindow,
    Summary,
    QueueStats,
    Throughput,
    TopErrors,
    RunTimes,
    PendingGroups,
}

/// What a test does around the calls it interposes on.
#[async_trait]
pub trait Interpose: Send + Sync + 'static {
    /// Before the call reaches the store; an error is the call's answer instead.
    async fn before(&self, _call: StoreCall) -> StoreResult<()> {
        Ok(())
    }

    /// After the store has answered.
    fn after(&self, _call: StoreCall) {}
}

/// `inner` with `hooks` around every async call; derefs to the hooks, so a test reads its
/// counters through the store it handed out.
pub struct InterposedStore<H> {
    inner: Arc<dyn Store>,
    hooks: H,
}

impl<H: Interpose> InterposedStore<H> {
    pub fn new(inner: Arc<dyn Store>, hooks: H) -> Self {
        InterposedStore { inner, hooks }
    }
}

impl<H> std::ops::Deref for InterposedStore<H> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.hooks
    }
}

#[async_trait]
impl<H: Interpose> StoreReads for InterposedStore<H> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.hooks.before(StoreCall::Ping).await?;
        let answer = self.inner.ping().await;
        self.hooks.after(StoreCall::Ping);
        answer
    }

    fn health(&self) -> StoreHealth {
        self.inner.health()
    }

    async fn bulk_preview(
        &self,
        source: Pillar,
        filter: &JobFilter,
        sample: u32,
    ) -> StoreResult<BulkPreview> {
        self.hooks.before(StoreCall::BulkPreview).await?;
        let answer = self.inner.bulk_preview(source, filter, sample).await;
        self.hooks.after(StoreCall::BulkPreview);
        answer
    }

    async fn get_batch(&self, id: BatchId) -> StoreResult<Option<Batch>> {
        self.hooks.before(StoreCall::GetBatch).await?;
        let answer = self.inner.get_batch(id).await;
        self.hooks.after(StoreCall::GetBatch);
        answer
    }

    async fn list_batches(&self, before: Option<BatchId>, limit: u32) -> StoreResult<Vec<Batch>> {
        self.hooks.before(StoreCall::ListBatches).await?;
        let answer = self.inner.list_batches(before, limit).await;
        self.hooks.after(StoreCall::ListBatches);
        answer
    }

    async fn batch_members(&self, id: BatchId, limit: u32) -> StoreResult<Vec<JobSummary>> {
        self.hooks.before(StoreCall::BatchMembers).await?;
        let answer = self.inner.batch_members(id, limit).await;
        self.hooks.after(StoreCall::BatchMembers);
        answer
    }

    async fn list_schedules(&self) -> StoreResult<Vec<Schedule>> {
        self.hooks.before(StoreCall::ListSchedules).await?;
        let answer = self.inner.list_schedules().await;
        self.hooks.after(StoreCall::ListSchedules);
        answer
    }

    async fn schedule_runs(&self, name: &str, limit: u32) -> StoreResult<Vec<ScheduleRun>> {
        self.hooks.before(StoreCall::ScheduleRuns).await?;
        let answer = self.inner.schedule_runs(name, limit).await;
        self.hooks.after(StoreCall::ScheduleRuns);
        answer
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueConfig>> {
        self.hooks.before(StoreCall::ListQueues).await?;
        let answer = self.inner.list_queues().await;
        self.hooks.after(StoreCall::ListQueues);
        answer
    }

    async fn load_settings(&self) -> StoreResult<EngineSettings> {
        self.hooks.before(StoreCall::LoadSettings).await?;
        let answer = self.inner.load_settings().await;
        self.hooks.after(StoreCall::LoadSettings);
        answer
    }

    async fn list_instances(&self, max_age: std::time::Duration) -> StoreResult<Vec<InstanceInfo>> {
        self.hooks.before(StoreCall::ListInstances).await?;
        let answer = self.inner.list_instances(max_age).await;
        self.hooks.after(StoreCall::ListInstances);
        answer
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        before_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<AuditEntry>> {
        self.hooks.before(StoreCall::ListAudit).await?;
        let answer = self.inner.list_audit(filter, before_id, limit).await;
        self.hooks.after(StoreCall::ListAudit);
        answer
    }

    async fn get_job(&self, id: JobId) -> StoreResult<Option<Job>> {
        self.hooks.before(StoreCall::GetJob).await?;
        let answer = self.inner.get_job(id).await;
        self.hooks.after(StoreCall::GetJob);
        answer
    }

    async fn finished_jobs(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        self.hooks.before(StoreCall::FinishedJobs).await?;
        let answer = self.inner.finished_jobs(ids).await;
        self.hooks.after(StoreCall::FinishedJobs);
        answer
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Page<JobSummary>> {
        self.hooks.before(StoreCall::ListJobs).await?;
        let answer = self.inner.list_jobs(query).await;
        self.hooks.after(StoreCall::ListJobs);
        answer
    }

    async fn count_jobs(&self, source: Pillar, filter: &JobFilter) -> StoreResult<JobCount> {
        self.hooks.before(StoreCall::CountJobs).await?;
        let answer = self.inner.count_jobs(source, filter).await;
        self.hooks.after(StoreCall::CountJobs);
        answer
    }

    async fn search_window(
        &self,
        source: Pillar,
        before: Option<Timestamp>,
    ) -> StoreResult<Option<Timestamp>> {
        self.hooks.before(StoreCall::SearchWindow).await?;
        let answer = self.inner.search_window(source, before).await;
        self.hooks.after(StoreCall::SearchWindow);
        answer
    }

    async fn summary(&self) -> StoreResult<Summary> {
        self.hooks.before(StoreCall::Summary).await?;
        let answer = self.inner.summary().await;
        self.hooks.after(StoreCall::Summary);
        answer
    }

    async fn queue_stats(&self) -> StoreResult<Vec<QueueStats>> {
        self.hooks.before(StoreCall::QueueStats).await?;
        let answer = self.inner.queue_stats().await;
        self.hooks.after(StoreCall::QueueStats);
        answer
    }

    async fn throughput(
        &self,
        minutes: u32,
        queue: Option<&str>,
    ) -> StoreResult<Vec<ThroughputBucket>> {
        self.hooks.before(StoreCall::Throughput).await?;
        let answer = self.inner.throughput(minutes, queue).await;
        self.hooks.after(StoreCall::Throughput);
        answer
    }

    async fn top_errors(&self, limit: u32) -> StoreResult<Vec<ErrorGroup>> {
        self.hooks.before(StoreCall::TopErrors).await?;
        let answer = self.inner.top_errors(limit).await;
        self.hooks.after(StoreCall::TopErrors);
        answer
    }

    async fn run_times(&self, minutes: u32) -> StoreResult<Vec<RunTimeHistogram>> {
        self.hooks.before(StoreCall::RunTimes).await?;
        let answer = self.inner.run_times(minutes).await;
        self.hooks.after(StoreCall::RunTimes);
        answer
    }

    async fn pending_groups(&self, limit: u32) -> StoreResult<Vec<PendingGroup>> {
        self.hooks.before(StoreCall::PendingGroups).await?;
        let answer = self.inner.pending_groups(limit).await;
        self.hooks.after(StoreCall::PendingGroups);
        answer
    }
}

#[async_trait]
impl<H: Interpose> Store for InterposedStore<H> {
    fn orders_writes_on_submit(&self) -> bool {
        self.inner.orders_writes_on_submit()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> StoreResult<EnqueueOutcome> {
        self.hooks.before(StoreCall::Enqueue).await?;
        let answer = self.inner.enqueue(req).await;
        self.hooks.after(StoreCall::Enqueue);
        answer
    }

    async fn enqueue_batch(&self, reqs: Vec<EnqueueRequest>) -> StoreResult<Vec<EnqueueOutcome>> {
        self.hooks.before(StoreCall::EnqueueBatch).await?;
        let answer = self.inner.enqueue_batch(reqs).await;
        self.hooks.after(StoreCall::EnqueueBatch);
        answer
    }

    async fn claim_batch(&self, req: ClaimRequest) -> StoreResult<Vec<Job>> {
        self.hooks.before(StoreCall::ClaimBatch).await?;
        let answer = self.inner.claim_batch(req).await;
        self.hooks.after(StoreCall::ClaimBatch);
        answer
    }

    async fn mark_processing(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<Vec<JobId>> {
        self.hooks.before(StoreCall::MarkProcessing).await?;
        let answer = self.inner.mark_processing(worker_id, ids).await;
        self.hooks.after(StoreCall::MarkProcessing);
        answer
    }

    async fn heartbeat(&self, worker_id: &str, ids: &[JobId]) -> StoreResult<HeartbeatReport> {
        self.hooks.before(StoreCall::Heartbeat).await?;
        let answer = self.inner.heartbeat(worker_id, ids).await;
        self.hooks.after(StoreCall::Heartbeat);
        answer
    }

    async fn release(
        &self,
        worker_id: &str,
        ids: &[JobId],
        run_at: Option<Timestamp>,
    ) -> StoreResult<u64> {
        self.hooks.before(StoreCall::Release).await?;
        let answer = self.inner.release(worker_id, ids, run_at).await;
        self.hooks.after(StoreCall::Release);
        answer
    }

    async fn complete(
        &self,
        worker_id: &str,
        completions: Vec<Completion>,
    ) -> StoreResult<Vec<Applied>> {
        self.hooks.before(StoreCall::Complete).await?;
        let answer = self.inner.complete(worker_id, completions).await;
        self.hooks.after(StoreCall::Complete);
        answer
    }

    async fn cancel(&self, id: JobId) -> StoreResult<CancelOutcome> {
        self.hooks.before(StoreCall::Cancel).await?;
        let answer = self.inner.cancel(id).await;
        self.hooks.after(StoreCall::Cancel);
        answer
    }

    async fn resurrect(&self, id: JobId, edit: Option<JobEdit>) -> StoreResult<Applied> {
        self.hooks.before(StoreCall::Resurrect).await?;
        let answer = self.inner.resurrect(id, edit).await;
        self.hooks.after(StoreCall::Resurrect);
        answer
    }

    async fn edit_job(&self, id: JobId, edit: JobEdit) -> StoreResult<Job> {
        self.hooks.before(StoreCall::EditJob).await?;
        let answer = self.inner.edit_job(id, edit).await;
        self.hooks.after(StoreCall::EditJob);
        answer
    }

    async fn purge(&self, source: Pillar, ids: &[JobId]) -> StoreResult<u64> {
        self.hooks.before(StoreCall::Purge).await?;
        let answer = self.inner.purge(source, ids).await;
        self.hooks.after(StoreCall::Purge);
        answer
    }

    async fn bulk_by_ids(
        &self,
        action: BulkAction,
        source: Pillar,
        ids: &[JobId],
    ) -> StoreResult<u64> {
        self.hooks.before(StoreCall::BulkByIds).await?;
        let answer = self.inner.bulk_by_ids(action, source, ids).await;
        self.hooks.after(StoreCall::BulkByIds);
        answer
    }

    async fn bulk_filter_step(&self, step: BulkFilterStep<'_>) -> StoreResult<BulkStep> {
        self.hooks.before(StoreCall::BulkFilterStep).await?;
        let answer = self.inner.bulk_filter_step(step).await;
        self.hooks.after(StoreCall::BulkFilterStep);
        answer
    }

    async fn create_batch(&self, req: BatchRequest) -> StoreResult<BatchCreated> {
        self.hooks.before(StoreCall::CreateBatch).await?;
        let answer = self.inner.create_batch(req).await;
        self.hooks.after(StoreCall::CreateBatch);
        answer
    }

    async fn create_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        enabled: bool,
    ) -> StoreResult<Schedule> {
        self.hooks.before(StoreCall::CreateSchedule).await?;
        let answer = self
            .inner
            .create_schedule(definition, origin, enabled)
            .await;
        self.hooks.after(StoreCall::CreateSchedule);
        answer
    }

    async fn replace_schedule(
        &self,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
    ) -> StoreResult<Schedule> {
        self.hooks.before(StoreCall::ReplaceSchedule).await?;
        let answer = self.inner.replace_schedule(definition, origin).await;
        self.hooks.after(StoreCall::ReplaceSchedule);
        answer
    }

    async fn set_schedule_enabled(&self, name: &str, enabled: bool) -> StoreResult<Schedule> {
        self.hooks.before(StoreCall::SetScheduleEnabled).await?;
        let answer = self.inner.set_schedule_enabled(name, enabled).await;
        self.hooks.after(StoreCall::SetScheduleEnabled);
        answer
    }

    async fn delete_schedule(&self, name: &str) -> StoreResult<Applied> {
        self.hooks.before(StoreCall::DeleteSchedule).await?;
        let answer = self.inner.delete_schedule(name).await;
        self.hooks.after(StoreCall::DeleteSchedule);
        answer
    }

    async fn fire_schedule(&self, fire: ScheduleFire) -> StoreResult<Vec<FireOutcome>> {
        self.hooks.before(StoreCall::FireSchedule).await?;
        let answer = self.inner.fire_schedule(fire).await;
        self.hooks.after(StoreCall::FireSchedule);
        answer
    }

    async fn update_queue(&self, name: &str, patch: QueuePatch) -> StoreResult<QueueConfig> {
        self.hooks.before(StoreCall::UpdateQueue).await?;
        let answer = self.inner.update_queue(name, patch).await;
        self.hooks.after(StoreCall::UpdateQueue);
        answer
    }

    async fn save_settings(&self, settings: &EngineSettings) -> StoreResult<()> {
        self.hooks.before(StoreCall::SaveSettings).await?;
        let answer = self.inner.save_settings(settings).await;
        self.hooks.after(StoreCall::SaveSettings);
        answer
    }

    async fn rescue_step(&self, step: RescueStep<'_>) -> StoreResult<u64> {
        self.hooks.before(StoreCall::Rescue).await?;
        let answer = self.inner.rescue_step(step).await;
        self.hooks.after(StoreCall::Rescue);
        answer
    }

    async fn prune_step(&self, step: PruneStep) -> StoreResult<u64> {
        self.hooks.before(StoreCall::PruneStep).await?;
        let answer = self.inner.prune_step(step).await;
        self.hooks.after(StoreCall::PruneStep);
        answer
    }

    async fn heartbeat_instance(&self, info: &InstanceInfo) -> StoreResult<bool> {
        self.hooks.before(StoreCall::HeartbeatInstance).await?;
        let answer = self.inner.heartbeat_instance(info).await;
        self.hooks.after(StoreCall::HeartbeatInstance);
        answer
    }

    async fn set_instance_quiet(&self, id: &str, quiet: bool) -> StoreResult<Applied> {
        self.hooks.before(StoreCall::SetInstanceQuiet).await?;
        let answer = self.inner.set_instance_quiet(id, quiet).await;
        self.hooks.after(StoreCall::SetInstanceQuiet);
        answer
    }

    async fn deregister_instance(&self, id: &str) -> StoreResult<()> {
        self.hooks.before(StoreCall::DeregisterInstance).await?;
        let answer = self.inner.deregister_instance(id).await;
        self.hooks.after(StoreCall::DeregisterInstance);
        answer
    }

    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
        self.hooks.before(StoreCall::AppendAudit).await?;
        let answer = self.inner.append_audit(entry).await;
        self.hooks.after(StoreCall::AppendAudit);
        answer
    }
}
