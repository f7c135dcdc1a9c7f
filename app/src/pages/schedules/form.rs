//! The schedule form, for a new schedule and for editing one: every field of a
//! `ScheduleDefinition`, prefilled from a definition or from what was typed last, with the
//! problem that refused it next to the form and on the field it is about.

use deck_engine::validation::ValidationError;
use leptos::prelude::*;

use crate::components::layout::{PostForm, TextBox};
use crate::schedule_form::{ScheduleForm, input_for};

/// Offered while typing a zone; any IANA name works.
const COMMON_ZONES: [&str; 14] = [
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Paris",
    "Europe/Madrid",
    "Europe/Warsaw",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Tokyo",
    "Australia/Sydney",
];

/// The zones datalist the zone fields offer, once per page (the edit form and the `?tz=`
/// form share it).
#[component]
pub fn ZoneList() -> impl IntoView {
    let options = COMMON_ZONES
        .iter()
        .map(|z| view! { <option value=*z></option> })
        .collect_view();
    view! { <datalist id="time-zones">{options}</datalist> }
}

/// `endpoint`: `schedule/create` (the name is asked) or `schedule/edit` (the name is fixed,
/// sent as a hidden field).
#[component]
pub fn ScheduleFormView(
    endpoint: &'static str,
    form: ScheduleForm,
    problem: Option<ValidationError>,
) -> impl IntoView {
    let editing = endpoint == "schedule/edit";
    let bad_input = problem.as_ref().and_then(|p| input_for(&p.field));
    let bad = move |input: &str| bad_input == Some(input);
    let invalid = move |input: &str| bad(input).then_some("true");
    let described = move |input: &str| bad(input).then_some("schedule-form-problem");
    let problem_box = problem.map(|p| {
        let field = (!p.field.is_empty()).then(|| view! { <code class="field">{p.field.clone()}</code>": " });
        let help = (!p.help.is_empty()).then(|| view! { <br/><small class="help">{p.help.clone()}</small> });
        view! {
            <div class="flash err form-problem" role="alert" id="schedule-form-problem" data-field=bad_input.unwrap_or_default()>
                {field}<span class="problem">{p.problem.clone()}</span>{help}
            </div>
        }
    });
    let choice = |value: &'static str, label: &'static str, current: &str| {
        let selected = current == value;
        view! { <option value=value selected=selected>{label}</option> }
    };
    let f = form;
    let name_field = if editing {
        view! { <input type="hidden" name="name" value=f.name.clone()/> }.into_any()
    } else {
        view! {
            <label>"Name"
                <input type="text" name="name" value=f.name.clone() required=true maxlength="255" autocomplete="off" spellcheck="false" aria-invalid=invalid("name") aria-describedby=described("name")/>
                <small>"Unique; the schedule's identity in the console, the API and deck.toml."</small>
            </label>
        }
        .into_any()
    };
    view! {
        <PostForm endpoint=endpoint class="settings schedule-form">
            {problem_box}
            {name_field}
            <fieldset>
                <legend>"When"</legend>
                <label>"Kind"
                    <select name="kind" aria-invalid=invalid("kind")>
                        {choice("cron", "cron expression", &f.kind)}
                        {choice("every", "fixed interval", &f.kind)}
                    </select>
                </label>
                <label>"Expression"
                    <input type="text" name="expr" value=f.expr.clone() required=true spellcheck="false" autocomplete="off" placeholder="*/5 * * * *" aria-invalid=invalid("expr") aria-describedby=described("expr")/>
                    <small>"cron: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or @hourly, @daily…; interval: seconds (300) or a duration (5m, 1h), aligned to the Unix epoch."</small>
                </label>
                <label>"Time zone"
                    <input type="text" name="time_zone" value=f.time_zone.clone() list="time-zones" spellcheck="false" autocomplete="off" aria-invalid=invalid("time_zone") aria-describedby=described("time_zone")/>
                    <small>"IANA name (Europe/Berlin); the cron expression is read in it, across daylight-saving changes."</small>
                </label>
            </fieldset>
            <fieldset>
                <legend>"Job"</legend>
                <label>"Queue"
                    <input type="text" name="queue" value=f.queue.clone() required=true spellcheck="false" aria-invalid=invalid("queue") aria-describedby=described("queue")/>
                </label>
                <label>"Job type"
                    <input type="text" name="job_type" value=f.job_type.clone() required=true spellcheck="false" aria-invalid=invalid("job_type") aria-describedby=described("job_type")/>
                </label>
                <label class="block">"Payload (JSON)"
                    <TextBox name="payload" rows=5 text=f.payload.clone() invalid=bad("payload")/>
                </label>
                <label>"Priority"
                    <input type="number" name="priority" value=f.priority.clone() step="1" aria-invalid=invalid("priority") aria-describedby=described("priority")/>
                </label>
                <label>"Tags (comma-separated)"
                    <input type="text" name="tags" value=f.tags.clone() spellcheck="false" aria-invalid=invalid("tags") aria-describedby=described("tags")/>
                    <small>"Each job also gets the tag schedule:<name>."</small>
                </label>
                <label>"Max attempts"
                    <input type="number" name="max_attempts" value=f.max_attempts.clone() min="1" placeholder="engine default" aria-invalid=invalid("max_attempts") aria-describedby=described("max_attempts")/>
                </label>
                <label>"Expires after (s)"
                    <input type="text" name="expires_after" value=f.expires_after.clone() placeholder="never" spellcheck="false" aria-invalid=invalid("expires_after") aria-describedby=described("expires_after")/>
                    <small>"A job not started this long after its occurrence goes to the dead letters as expired. Seconds or a duration (10m)."</small>
                </label>
            </fieldset>
            <fieldset>
                <legend>"Policies"</legend>
                <label>"Missed occurrences (downtime)"
                    <select name="misfire" aria-invalid=invalid("misfire")>
                        {choice("run_once", "run the latest once", &f.misfire)}
                        {choice("run_all", "run all, up to the cap", &f.misfire)}
                        {choice("skip", "skip them", &f.misfire)}
                    </select>
                </label>
                <label>"Cap (run all)"
                    <input type="number" name="misfire_cap" value=f.misfire_cap.clone() min="1" max="1000" aria-invalid=invalid("misfire_cap") aria-describedby=described("misfire_cap")/>
                    <small>"At most this many missed occurrences are caught up on, the latest ones."</small>
                </label>
                <label>"While the previous job is active"
                    <select name="overlap" aria-invalid=invalid("overlap")>
                        {choice("allow", "enqueue anyway", &f.overlap)}
                        {choice("skip_while_active", "skip the occurrence", &f.overlap)}
                    </select>
                </label>
            </fieldset>
            <div class="actions">
                <button>{if editing { "Save changes" } else { "Create schedule" }}</button>
            </div>
        </PostForm>
    }
}
