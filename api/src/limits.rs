//! The API's schemas of the engine's input rules, and the limits of its own reads. The numbers
//! and patterns are the engine's (`deck_engine::validation`, the rules table the operations
//! layer checks every write with); the OpenAPI document publishes them (the `Name`, `Tag`
//! and `AnyJson` schemas below, and the DTOs' attributes, which a test compares with these
//! constants), so a generated client's validation and the server's agree on every input.

use std::borrow::Cow;

use deck_engine::validation::{
    MAX_NAME_CHARS, MAX_TAGS_CHARS, name_pattern, schedule_name_pattern, tag_pattern, text_pattern,
};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::{PartialSchema, ToSchema};

use super::error::ApiError;

/// `?wait=`: a non-negative decimal number with an optional unit (`parse_wait`).
pub const WAIT_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(ms|s|m)?$";

/// Free text shown to people (a batch's description): no control characters, at most
/// `deck_engine::batch::MAX_DESCRIPTION_CHARS` characters.
pub struct Description;

impl PartialSchema for Description {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(deck_engine::batch::MAX_DESCRIPTION_CHARS))
            .pattern(Some(text_pattern()))
            .description(Some(format!(
                "At most {} characters, no control characters.",
                deck_engine::batch::MAX_DESCRIPTION_CHARS
            )))
            .into()
    }
}

impl ToSchema for Description {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Description")
    }
}

/// The schema of a name (`validation::name_pattern`).
pub struct Name;

impl PartialSchema for Name {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_NAME_CHARS))
            .pattern(Some(name_pattern()))
            .description(Some(format!(
                "1 to {MAX_NAME_CHARS} characters, no control characters, no leading or \
                 trailing whitespace."
            )))
            .into()
    }
}

impl ToSchema for Name {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Name")
    }
}

/// The schema of a schedule's name (`validation::schedule_name_pattern`).
pub struct ScheduleName;

impl PartialSchema for ScheduleName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_NAME_CHARS))
            .pattern(Some(schedule_name_pattern()))
            .description(Some(format!(
                "1 to {MAX_NAME_CHARS} characters, no control characters, no leading or \
                 trailing whitespace, not `.` or `..`."
            )))
            .into()
    }
}

impl ToSchema for ScheduleName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ScheduleName")
    }
}

/// The schema of one tag (`validation::tag_pattern`).
pub struct Tag;

impl PartialSchema for Tag {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_TAGS_CHARS))
            .pattern(Some(tag_pattern()))
            .description(Some(format!(
                "Non-empty, no commas, no control characters, no leading or trailing \
                 whitespace. All of a job's tags joined with commas are at most \
                 {MAX_TAGS_CHARS} characters."
            )))
            .into()
    }
}

impl ToSchema for Tag {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Tag")
    }
}

/// Any JSON value — object, array, string, number, boolean or `null` — as payloads and
/// results are. An empty schema, so generated clients take what the server returns.
pub struct AnyJson;

impl PartialSchema for AnyJson {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .description(Some(
                "Any JSON value: object, array, string, number, boolean or null.",
            ))
            .into()
    }
}

impl ToSchema for AnyJson {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("AnyJson")
    }
}

/// Largest `?count=` of upcoming occurrences a schedule read lists.
pub const MAX_UPCOMING: u32 = 50;
/// Upcoming occurrences listed when `?count=` is absent.
pub const DEFAULT_UPCOMING: u32 = 5;
/// Largest `?limit=` of a schedule's run history.
pub const MAX_RUNS: u32 = 500;
/// Runs listed when `?limit=` is absent.
pub const DEFAULT_RUNS: u32 = 50;

/// `format` of a cron expression. JSON Schema cannot state croner's grammar (nor "occurs
/// again"), so the document names the format and describes it; the server checks it (400
/// `invalid_field`, field `cron`), and `contract/hooks.py` generates valid ones.
pub const CRON_FORMAT: &str = "cron";
/// `format` of an IANA time-zone name (`Europe/Berlin`), checked by the server against the
/// tz database it was built with (400 `invalid_field`).
pub const TIME_ZONE_FORMAT: &str = "iana-time-zone";

/// The schema of a cron expression (see `CRON_FORMAT`).
pub struct CronExpr;

impl PartialSchema for CronExpr {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::Custom(CRON_FORMAT.to_string())))
            // Empty is no expression (400 `invalid_field`, field `cron`); give `every_secs`
            // instead, with `cron` absent or null.
            .min_length(Some(1))
            .description(Some(
                "A cron expression: 5 fields (minute hour day-of-month month day-of-week, e.g. \
                 `0 9 * * MON-FRI`), 6 with seconds first (`30 0 9 * * *`), or an alias \
                 (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`). Names (`JAN`, \
                 `MON`), ranges, lists, steps (`*/15`), `L`, `W` and `#` as croner reads \
                 them. It must occur again; an empty one is refused.",
            ))
            .into()
    }
}

impl ToSchema for CronExpr {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("CronExpr")
    }
}

/// The schema of a time-zone name (see `TIME_ZONE_FORMAT`).
pub struct IanaTimeZone;

impl PartialSchema for IanaTimeZone {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::Custom(TIME_ZONE_FORMAT.to_string())))
            .enum_values(Some(deck_engine::schedule::zone_names()))
            .description(Some(
                "An IANA time-zone name from the tz database, as written there (`UTC`, \
                 `Europe/Berlin`, `America/New_York`): one of the names listed, the database \
                 this server was built with. Any other name is refused (400 `invalid_field`).",
            ))
            .into()
    }
}

impl ToSchema for IanaTimeZone {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TimeZone")
    }
}

/// The schema of a `?tz=` query: a time-zone name, or empty (`?tz=`) for none given.
pub struct ZoneQuery;

impl PartialSchema for ZoneQuery {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                IanaTimeZone::name(),
            )))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some([""])),
            )
            .description(Some("A time-zone name; empty (`?tz=`) is as if absent."))
            .into()
    }
}

impl ToSchema for ZoneQuery {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TimeZoneQuery")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((IanaTimeZone::name().into_owned(), IanaTimeZone::schema()));
    }
}

/// A count query parameter within `1..=max`, absent meaning `default`.
pub fn check_count(
    field: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<u32, ApiError> {
    match value {
        None => Ok(default),
        Some(v) if (1..=max).contains(&v) => Ok(v),
        Some(v) => Err(ApiError::bad_request(
            "invalid_field",
            format!("invalid {field}: is {v} (give 1 to {max})"),
        )
        .with_field(field)),
    }
}
